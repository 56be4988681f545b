// node scripts/report-screenshot.mjs PAGE.html OUT.png: the top 1280 x 1500 px of a report page,
// once its charts are drawn (scripts/report-screenshot).
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const { chromium } = createRequire(path.join(root, 'web', 'package.json'))('playwright-core');
const [pageFile, out] = process.argv.slice(2);
const browser = await chromium.launch({
  executablePath: process.env.KVTUNE_CHROMIUM ?? '/usr/bin/chromium',
  args: ['--no-sandbox'],
});
try {
  const page = await browser.newPage({ viewport: { width: 1280, height: 1500 } });
  await page.goto(pathToFileURL(path.resolve(pageFile)).href);
  await page.waitForSelector('body[data-charts="drawn"]', { timeout: 60000 });
  await page.screenshot({ path: out });
} finally {
  await browser.close();
}
