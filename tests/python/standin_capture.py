"""python/kvtune_capture.py run on the stand-in model (standin.py) instead of a transformers
checkpoint: the capture of docs/real-caches.md's worked example, made where transformers and a
real model are not available. Arguments are the tool's, without --model (standin/tiny is given).

    /usr/bin/python3 tests/python/standin_capture.py --prompts a.txt b.txt --out capture
"""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))

import standin  # noqa: E402  (the fake transformers must be installed before the tool imports it)

standin.install()
import kvtune_capture  # noqa: E402

if __name__ == "__main__":
    sys.exit(kvtune_capture.main(["--model", "standin/tiny", *sys.argv[1:]]))
