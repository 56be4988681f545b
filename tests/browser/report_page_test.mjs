// report.html in a real browser: runs the known small sweep (report-sweep.toml) with --report,
// loads the page from disk in headless Chromium (Debian's `chromium`, driven by playwright-core
// from web/node_modules), and checks that
//   - nothing is logged as an error and nothing is fetched from the network,
//   - every chart is drawn, with as many marks as the results on disk imply (counted through the
//     Vega view API, the expectations computed here from results.jsonl and summary.json),
//   - hovering a point shows its specs and metrics, and a click on a table heading sorts the table,
// and saves a screenshot of the page as report.png in the output folder.
//
// node tests/browser/report_page_test.mjs --kvtune BUILD/kvtune --out DIR [--chromium PATH]
import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync, existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import assert from 'node:assert/strict';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '..', '..');
const args = Object.fromEntries(
  process.argv.slice(2).reduce((pairs, a, i, all) => (a.startsWith('--') ? [...pairs, [a.slice(2), all[i + 1]]] : pairs), []));
const kvtune = args.kvtune;
const out = path.resolve(args.out ?? 'report-page-test');
const chromiumPath = args.chromium ?? process.env.KVTUNE_CHROMIUM ?? '/usr/bin/chromium';
if (!kvtune) throw new Error('usage: report_page_test.mjs --kvtune BUILD/kvtune --out DIR [--chromium PATH]');
if (!existsSync(chromiumPath)) {
  throw new Error(`no Chromium at ${chromiumPath}: scripts/run-tests installs Debian's chromium (or pass --chromium PATH)`);
}
const { chromium } = createRequire(path.join(root, 'web', 'package.json'))('playwright-core');

// 1. The sweep, with the page.
const sweepDir = path.join(out, 'sweep');
rmSync(out, { recursive: true, force: true });
mkdirSync(out, { recursive: true });
execFileSync(kvtune, ['sweep', path.join(here, 'report-sweep.toml'), '--out', sweepDir, '--report', '--jobs', '2'],
             { stdio: ['ignore', 'ignore', 'inherit'] });
const page_file = path.join(sweepDir, 'report.html');
assert.ok(existsSync(page_file), 'kvtune sweep --report wrote no report.html');

// 2. What the results on disk say the charts must hold.
const records = readFileSync(path.join(sweepDir, 'results.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l));
const summary = JSON.parse(readFileSync(path.join(sweepDir, 'summary.json'), 'utf8'));
const ok = records.filter((r) => r.status === 'ok');
const key = (p) => `${p.k} / ${p.v}`;
const picks = new Set();
if (summary.best) picks.add(key(summary.best));
for (const rt of summary.runtimes) if (rt.recommendation) picks.add(key(rt.recommendation.point));
const depths = new Set(ok.flatMap((r) => (r.needle_depths ?? []).map((d) => d.depth)));
// The K-vs-V cells: bit widths binned to 0.01, lossless pairs (no place on a log scale) left out.
const bin = (b) => Math.round(b * 100) / 100;
const bitCells = new Set(ok.filter((r) => r.rel_out_err.mean > 0).map((r) => `${bin(r.k_bits)}/${bin(r.v_bits)}`));
// The memory chart: 1024 tokens doubling up to twice the larger of the evaluated and fit contexts.
const fitCtx = summary.budget.fit.ctx;
let contexts = 0;
for (let c = 1024; c <= Math.max(2 * Math.max(summary.workload.tokens, fitCtx), 4096); c *= 2) contexts++;
const expected = {
  pareto: {
    points_marks: ok.filter((r) => r.rel_out_err && r.rel_out_err.mean > 0).length,
    // A lossless pair (f32) has no place on the log axis: the table lists it.
    frontier_marks: summary.frontier.filter((p) => p.metrics.rel_out_err.mean > 0).length,
    picks_marks: picks.size,
    budget_region_marks: 1,
    budget_bound_marks: 1,
  },
  needles: { cells_marks: picks.size * depths.size, cell_text_marks: picks.size * depths.size },
  layers: { layers_points_marks: picks.size * 2 },   // layers = [0, 31]
  heads: { heads_points_marks: picks.size * 2 },     // heads = [0, 1]
  kv_split: { split_cells_marks: bitCells.size },
  memory: { memory_lines_marks: picks.size * contexts, memory_budget_marks: 1 },
};
// The sweep file fixes these, whatever the runtime tables hold: 5 K candidates x 3 V candidates.
assert.ok(ok.length >= 15, `expected at least the 15 searched pairs, got ${ok.length}`);
assert.ok(picks.size >= 1, 'the test sweep must have a feasible best');

// 3. The page in Chromium.
const browser = await chromium.launch({ executablePath: chromiumPath, args: ['--no-sandbox'] });
const failures = [];
try {
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  page.on('console', (m) => { if (m.type() === 'error' || m.type() === 'warning') failures.push(`console ${m.type()}: ${m.text()}`); });
  page.on('pageerror', (e) => failures.push(`page error: ${e.message}`));
  page.on('request', (r) => { if (!r.url().startsWith('file:') && !r.url().startsWith('data:')) failures.push(`network request: ${r.url()}`); });
  await page.goto(pathToFileURL(page_file).href);
  await page.waitForSelector('body[data-charts]', { timeout: 60000 });
  assert.equal(await page.getAttribute('body', 'data-charts'), 'drawn');

  const counts = await page.evaluate(() => {
    const out = {};
    const walk = (mark, into) => {
      if (mark.name) into[mark.name] = (into[mark.name] ?? 0) + mark.items.length;
      for (const item of mark.items) for (const child of item.items ?? []) walk(child, into);
    };
    for (const [name, view] of Object.entries(window.kvtuneViews)) walk(view.scenegraph().root, (out[name] = {}));
    return out;
  });
  assert.deepEqual(Object.keys(counts).sort(), Object.keys(expected).sort(), 'the charts drawn');
  for (const [chart, marks] of Object.entries(expected)) {
    for (const [mark, n] of Object.entries(marks)) {
      assert.equal(counts[chart][mark], n, `${chart}: ${mark}`);
    }
  }
  // Every rendered mark is in the SVG too (the renderer, not only the scenegraph).
  const svgPoints = await page.locator('#chart-pareto g.points_marks path').count();
  assert.equal(svgPoints, expected.pareto.points_marks, 'pareto points in the SVG');

  // Hover: the tooltip names the pair and its bits.
  const point = page.locator('#chart-pareto g.points_marks path').first();
  await point.hover({ force: true });
  const tooltip = page.locator('#vg-tooltip-element');
  await tooltip.waitFor({ state: 'visible', timeout: 5000 });
  const tip = await tooltip.textContent();
  assert.match(tip, /bits\/element/);
  assert.match(tip, /K .*, V /);

  // The table of every point: one row per record; a click on "bits" sorts it ascending.
  assert.equal(await page.locator('#points-table tbody tr').count(), records.length);
  await page.locator('#points-table th', { hasText: /^bits$/ }).click();
  const bits = await page.$$eval('#points-table tbody tr td:nth-child(5)', (cells) => cells.map((c) => parseFloat(c.dataset.v)));
  assert.deepEqual(bits, [...bits].sort((a, b) => a - b), 'sorted by bits');

  // The runtime settings are copyable blocks.
  assert.ok(await page.locator('.snippet button.copy').count() >= 1, 'a copy button beside the settings');

  await page.screenshot({ path: path.join(out, 'report.png'), fullPage: true });
} finally {
  await browser.close();
}
assert.deepEqual(failures, [], 'no console errors, page errors or network requests');
console.log(`report page test: every chart drawn with the expected marks; screenshot ${path.join(out, 'report.png')}`);
