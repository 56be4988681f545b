"""Tests of python/kvtune_capture.py against the stand-in model of standin.py, through the same
AttentionInterface registration a real transformers model uses."""

import contextlib
import importlib.util
import io
import json
import os
import subprocess
import sys
import tempfile
import unittest
from unittest import mock

import torch

import standin

HERE = os.path.dirname(os.path.abspath(__file__))
TOOL = os.path.normpath(os.path.join(HERE, "..", "..", "python", "kvtune_capture.py"))
MODEL = "standin/tiny"


def load_tool():
    spec = importlib.util.spec_from_file_location("kvtune_capture", TOOL)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


tool = load_tool()

ST_DTYPES = {"F16": torch.float16, "BF16": torch.bfloat16, "F32": torch.float32, "F64": torch.float64,
             "I64": torch.int64}


def read_safetensors(path):
    """(tensors, metadata), checking the layout: header a multiple of 8 padded with spaces, the
    data indexed without holes to the end of the file."""
    with open(path, "rb") as f:
        data = f.read()
    n = int.from_bytes(data[:8], "little")
    raw = data[8:8 + n]
    assert n % 8 == 0, f"{path}: header length {n} is not a multiple of 8"
    assert raw == raw.rstrip(b" ") + b" " * (len(raw) - len(raw.rstrip(b" "))), "padding is not spaces"
    header = json.loads(raw)
    metadata = header.pop("__metadata__")
    body, at, tensors = data[8 + n:], 0, {}
    for name, entry in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"]):
        begin, end = entry["data_offsets"]
        assert begin == at, f"{path}: {name} starts at {begin}, the previous tensor ended at {at}"
        dtype = ST_DTYPES[entry["dtype"]]
        tensors[name] = torch.frombuffer(bytearray(body[begin:end]), dtype=dtype).reshape(entry["shape"])
        at = end
    assert at == len(body), f"{path}: {len(body) - at} bytes after the last tensor"
    return tensors, metadata


def same_bits(a, b):
    """Bit for bit: the same dtype, shape and bytes (so -0.0 differs from 0.0, as NaNs would)."""
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.element_size() == 2:
        return torch.equal(a.contiguous().view(torch.int16), b.contiguous().view(torch.int16))
    return torch.equal(a, b)


def run_tool(argv):
    """main() in this process: (exit status, stderr)."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            rc = tool.main(argv)
        except SystemExit as e:  # argparse's own refusals
            rc = e.code
    return rc, err.getvalue()


TEXT = ("The key-value cache holds, for every layer and every KV head, the keys after RoPE and the values "
        "of all the tokens so far; a quantizer sees exactly these. ") * 3


class CaptureTest(unittest.TestCase):
    def setUp(self):
        self.fake = standin.install()
        self.dir = tempfile.TemporaryDirectory()
        self.tmp = self.dir.name
        self.out = os.path.join(self.tmp, "capture")

    def tearDown(self):
        standin.uninstall()
        self.dir.cleanup()

    def prompt(self, name, text):
        path = os.path.join(self.tmp, name)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        return path

    def prompts(self):
        # Three samples of different lengths (BOS included): 151 tokens (100 with --max-tokens 100),
        # 70 and 81.
        return [self.prompt("doc1.txt", TEXT[:150]), self.prompt("doc2.txt", TEXT[10:79]),
                self.prompt("doc3.txt", TEXT[40:120])]

    def leftovers(self):
        return sorted(n for n in os.listdir(self.tmp) if not n.endswith(".txt"))

    def capture(self, *extra, prompts=None, model=MODEL):
        argv = ["--model", model, "--prompts", *(prompts or self.prompts()), "--out", self.out, *extra]
        rc, err = run_tool(argv)
        self.assertEqual(rc, 0, err)
        with open(os.path.join(self.out, "manifest.json"), encoding="utf-8") as f:
            return json.load(f)

    # -----------------------------------------------------------------------------------------

    def test_tensors_are_the_models_attention_inputs_bit_for_bit(self):
        for dtype in (torch.float16, torch.bfloat16):
            with self.subTest(dtype=dtype):
                self.fake = standin.install()
                name = str(dtype).replace("torch.", "")
                manifest = self.capture("--layers", "2,0", "--queries", "16", "--max-tokens", "100",
                                        "--k-pre-rope", "--dtype", name, "--force")
                model = self.fake.created[-1]
                self.assertEqual(self.fake.loads[-1]["attn_implementation"], "kvtune_capture")
                self.assertEqual(self.fake.loads[-1]["dtype"], dtype)  # 4.57: dtype=, not torch_dtype=
                self.assertEqual(manifest["dtype"], name)
                self.assertEqual(manifest["layers"], [0, 2])
                self.assertEqual(manifest["layer_files"], ["layer_000.safetensors", "layer_002.safetensors"])
                self.assertEqual(sorted(os.listdir(self.out)), ["layer_000.safetensors", "layer_002.safetensors",
                                                                "manifest.json"])
                self.assertEqual(manifest["samples"], [{"name": "doc1.txt", "tokens": 100},
                                                       {"name": "doc2.txt", "tokens": 70},
                                                       {"name": "doc3.txt", "tokens": 81}])
                lengths = [s["tokens"] for s in manifest["samples"]]
                n = 16
                for layer, file in zip(manifest["layers"], manifest["layer_files"]):
                    tensors, metadata = read_safetensors(os.path.join(self.out, file))
                    self.assertEqual(metadata, {"format": "kvtune-capture", "layer": str(layer)})
                    self.assertEqual(sorted(tensors), ["k", "k_pre_rope", "positions", "q", "q_positions", "v"])
                    seen = model.model.layers[layer].self_attn.recorded
                    self.assertEqual(len(seen), 3)  # one forward per sample
                    want = {
                        "k": torch.cat([s["k"][0] for s in seen], dim=1),
                        "v": torch.cat([s["v"][0] for s in seen], dim=1),
                        "q": torch.cat([s["q"][0, :, -n:] for s in seen], dim=1),
                    }
                    self.assertEqual(tuple(want["k"].shape), (2, sum(lengths), 16))
                    self.assertEqual(tuple(want["q"].shape), (4, 3 * n, 16))
                    for key, value in want.items():
                        self.assertTrue(same_bits(tensors[key], value), f"layer {layer} {key} ({name})")
                    positions = torch.cat([torch.arange(t) for t in lengths])
                    q_positions = torch.cat([torch.arange(t - n, t) for t in lengths])
                    self.assertTrue(same_bits(tensors["positions"], positions))
                    self.assertTrue(same_bits(tensors["q_positions"], q_positions))
                    self.check_k_pre_rope(tensors["k_pre_rope"], torch.cat([s["k_pre_rope"][0] for s in seen], dim=1),
                                          positions, dtype)

    def check_k_pre_rope(self, got, true, positions, dtype):
        """The inverse rotation cannot be bit-exact: the model rounded x*cos, rotate_half(x)*sin and
        their sum to its dtype. Each rounding errs by at most u (the unit roundoff: 2^-11 for
        float16, 2^-8 for bfloat16) times the pair's magnitude r = |(x_i, x_{i+D/2})|, three of
        them by at most ~3.4 u r through the inverse, plus the final rounding u r: the bound
        asserted is 5 u r. At position 0 (cos 1, sin 0) nothing is rounded: bit for bit."""
        self.assertEqual(got.dtype, dtype)
        self.assertEqual(got.shape, true.shape)
        u = {torch.float16: 2.0 ** -11, torch.bfloat16: 2.0 ** -8}[dtype]
        x, g = true.double(), got.double()
        half = x.shape[-1] // 2
        r = (x[..., :half] ** 2 + x[..., half:] ** 2).sqrt().repeat(1, 1, 2)
        err = (g - x).abs()
        worst = (err / (u * r).clamp_min(1e-30)).max().item()
        self.assertLessEqual(worst, 5.0, f"k_pre_rope off by {worst:.2f} u r ({dtype})")
        first = positions == 0
        self.assertTrue(same_bits(got[:, first], true[:, first]))

    def test_model_outputs_unchanged_by_the_hook(self):
        ids = torch.tensor([[256] + list(TEXT[:90].encode())])
        for dtype in (torch.float16, torch.bfloat16):
            with self.subTest(dtype=dtype):
                self.fake = fake = standin.install()
                stock = fake.AutoModelForCausalLM.from_pretrained(MODEL, attn_implementation="sdpa", dtype=dtype)
                with torch.no_grad():
                    want = stock(ids).logits
                recorder = tool.Recorder([0, 1, 2], 8)
                name = tool.register_attention(fake, recorder)
                hooked = fake.AutoModelForCausalLM.from_pretrained(MODEL, attn_implementation=name, dtype=dtype)
                recorder.tokens = ids.shape[1]
                with torch.no_grad():
                    got = hooked(ids).logits
                self.assertEqual(sorted(recorder.seen), [0, 1, 2])  # the hook did run
                self.assertTrue(same_bits(got, want), f"logits changed by the hook ({dtype})")

    def test_capture_run_outputs_match_the_stock_model(self):
        # The last hidden states the model produced inside the tool's own run (the tool runs the
        # base model, without the LM head) against a stock sdpa model on the same tokens.
        self.capture("--queries", "8", "--dtype", "float16")
        during = self.fake.created[-1].model.outputs
        stock = self.fake.AutoModelForCausalLM.from_pretrained(MODEL, attn_implementation="sdpa", dtype=torch.float16)
        tokenizer = self.fake.AutoTokenizer.from_pretrained(MODEL)
        for path, hidden in zip(self.prompts(), during):
            with open(path, encoding="utf-8") as f:
                ids = tokenizer(f.read(), return_tensors="pt")["input_ids"]
            with torch.no_grad():
                self.assertTrue(same_bits(stock.model(ids).last_hidden_state, hidden), path)

    def test_a_softcapped_model_attends_capped_during_the_capture(self):
        # Gemma 2: stock sdpa drops the softcap, so the tool attends with the model's own eager
        # function and the eager mask. The capture run's hidden states are a stock eager model's,
        # bit for bit, and a stock sdpa model's differ (the cap changes the stand-in's attention);
        # so do the later layers' captured keys.
        model = "standin/tiny-softcap"
        manifest = self.capture("--queries", "8", "--dtype", "float16", model=model)
        self.assertEqual(manifest["config"]["attn_logit_softcapping"], 1.0)
        self.assertEqual(self.fake.loads[-1]["attn_implementation"], "kvtune_capture")
        during = self.fake.created[-1].model.outputs
        load = self.fake.AutoModelForCausalLM.from_pretrained
        eager = load(model, attn_implementation="eager", dtype=torch.float16)
        sdpa = load(model, attn_implementation="sdpa", dtype=torch.float16)
        tokenizer = self.fake.AutoTokenizer.from_pretrained(model)
        for path, hidden in zip(self.prompts(), during):
            with open(path, encoding="utf-8") as f:
                ids = tokenizer(f.read(), return_tensors="pt")["input_ids"]
            with torch.no_grad():
                self.assertTrue(same_bits(eager.model(ids).last_hidden_state, hidden), path)
                self.assertFalse(torch.equal(sdpa.model(ids).last_hidden_state, hidden), path)
        tensors, _ = read_safetensors(os.path.join(self.out, "layer_002.safetensors"))
        keys = torch.cat([s["k"][0] for s in eager.model.layers[2].self_attn.recorded], dim=1)
        self.assertTrue(same_bits(tensors["k"], keys))

    def test_a_softcapped_model_without_a_mask_is_refused(self):
        # Before transformers 4.53 the model builds its own mask; one that passes none would make
        # the eager function look ahead, so the tool stops rather than capture a wrong run.
        self.fake = standin.install(with_mask_interface=False)
        rc, err = run_tool(["--model", "standin/tiny-softcap", "--prompts", *self.prompts(), "--out", self.out])
        self.assertEqual(rc, 2, err)
        self.assertIn("layer 0: the model passed no attention mask", err)
        self.assertEqual(self.leftovers(), [])

    def test_without_a_mask_function_the_sliding_layer_would_change(self):
        # The check above is sensitive: with no mask function registered for the tool's name (as
        # in transformers' masking_utils, mask creation is then skipped), the sliding-window layer
        # attends everything and the logits differ.
        fake = standin.install(with_mask_interface=False)
        ids = torch.tensor([[256] + list(TEXT[:40].encode())])
        stock = fake.AutoModelForCausalLM.from_pretrained(MODEL, attn_implementation="sdpa", dtype=torch.bfloat16)
        name = tool.register_attention(fake, tool.Recorder([], 8))
        hooked = fake.AutoModelForCausalLM.from_pretrained(MODEL, attn_implementation=name, dtype=torch.bfloat16)
        with torch.no_grad():
            self.assertFalse(torch.equal(stock(ids).logits, hooked(ids).logits))

    def test_manifest(self):
        for version, dtype_kw in (("4.51.3", "torch_dtype"), ("4.57.0", "dtype"), ("5.0.0", "dtype")):
            with self.subTest(transformers=version):
                self.fake = standin.install(version=version)
                manifest = self.capture("--force")  # defaults: every layer, 64 queries, the checkpoint's dtype
                self.assertIn(dtype_kw, self.fake.loads[-1])
                self.assertEqual(self.fake.loads[-1][dtype_kw], "auto")
                self.assertEqual(manifest, {
                    "format": "kvtune-capture",
                    "version": 1,
                    "tool": {"name": "kvtune_capture.py", "version": "1", "torch": str(torch.__version__),
                             "transformers": version},
                    "model": MODEL,
                    "config": {
                        "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
                        "rope_theta": 10000.0, "rope_scaling": None, "rope_convention": "rotate_half",
                        "max_position_embeddings": 512, "sliding_window": 8, "sliding_layers": [1],
                        "query_pre_attn_scalar": None, "attn_logit_softcapping": None,
                        "architecture": "StandInForCausalLM",
                    },
                    "dtype": "bfloat16",
                    "layers": [0, 1, 2],
                    "layer_files": ["layer_000.safetensors", "layer_001.safetensors", "layer_002.safetensors"],
                    "samples": [{"name": "doc1.txt", "tokens": 151}, {"name": "doc2.txt", "tokens": 70},
                                {"name": "doc3.txt", "tokens": 81}],
                    "queries_per_sample": 64,
                    "k_pre_rope": False,
                })
                tensors, _ = read_safetensors(os.path.join(self.out, "layer_001.safetensors"))
                self.assertEqual(sorted(tensors), ["k", "positions", "q", "q_positions", "v"])
                self.assertEqual(tuple(tensors["q"].shape), (4, 3 * 64, 16))

    def test_force_replaces_an_earlier_capture_only(self):
        self.capture("--queries", "8")
        rc, err = run_tool(["--model", MODEL, "--prompts", *self.prompts(), "--out", self.out, "--queries", "8"])
        self.assertEqual(rc, 2)
        self.assertIn("already exists", err)
        manifest = self.capture("--queries", "4", "--layers", "1", "--force")
        self.assertEqual(manifest["queries_per_sample"], 4)
        self.assertEqual(sorted(os.listdir(self.out)), ["layer_001.safetensors", "manifest.json"])
        self.assertEqual(self.leftovers(), ["capture"])
        other = os.path.join(self.tmp, "notes")
        os.mkdir(other)
        open(os.path.join(other, "keep.md"), "w").close()
        rc, err = run_tool(["--model", MODEL, "--prompts", *self.prompts(), "--out", other, "--force"])
        self.assertEqual(rc, 2)
        self.assertIn("not a kvtune capture", err)
        self.assertEqual(os.listdir(other), ["keep.md"])

    def test_k_pre_rope_refused_where_the_rotation_is_not_rotate_half(self):
        model = "standin/tiny-interleaved"
        rc, err = run_tool(["--model", model, "--prompts", *self.prompts(), "--out", self.out, "--k-pre-rope"])
        self.assertEqual(rc, 2, err)
        self.assertIn("--k-pre-rope", err)
        self.assertIn("rotate_half", err)
        self.assertEqual(self.leftovers(), [])
        manifest = self.capture("--queries", "8", model=model)  # without --k-pre-rope it captures
        self.assertEqual(manifest["config"]["rope_convention"], "interleaved")

    def test_a_second_rotary_module_of_the_same_class_still_shows_the_layout(self):
        # Gemma 3 under transformers 4.x: rotary_emb_local turns the sliding layers by their own base.
        # The layout is known (rotate_half), the RoPE per layer type is written, --k-pre-rope refused.
        model = "standin/tiny-local-rope"
        rc, err = run_tool(["--model", model, "--prompts", *self.prompts(), "--out", self.out, "--k-pre-rope"])
        self.assertEqual(rc, 2, err)
        self.assertIn("more than one rotary embedding (rotary_emb, rotary_emb_local)", err)
        self.assertEqual(self.leftovers(), [])
        manifest = self.capture("--queries", "8", model=model)
        self.assertEqual(manifest["config"]["rope_convention"], "rotate_half")
        self.assertEqual(manifest["config"]["rope_scaling"], {
            "full_attention": {"rope_type": "default"},
            "sliding_attention": {"rope_type": "default", "rope_theta": 1000.0}})

    def test_a_rotary_module_taking_the_layer_type_still_shows_the_layout(self):
        # Gemma 3 under transformers 5: one rotary module, forward(x, position_ids, layer_type). The
        # layout is read with layer 0's type, the RoPE per layer type is written, --k-pre-rope refused.
        self.fake = standin.install(version="5.0.0")
        model = "standin/tiny-typed-rope"
        rc, err = run_tool(["--model", model, "--prompts", *self.prompts(), "--out", self.out, "--k-pre-rope"])
        self.assertEqual(rc, 2, err)
        self.assertIn("turns each layer type by its own base", err)
        self.assertEqual(self.leftovers(), [])
        manifest = self.capture("--queries", "8", model=model)
        self.assertEqual(manifest["config"]["rope_convention"], "rotate_half")
        self.assertIsNone(manifest["config"]["rope_theta"])  # each type carries its own
        self.assertEqual(manifest["config"]["rope_scaling"], {
            "full_attention": {"rope_type": "default", "rope_theta": 10000.0},
            "sliding_attention": {"rope_type": "default", "rope_theta": 1000.0}})

    def test_a_multimodal_models_rotary_embedding_is_found_in_its_language_model(self):
        # Gemma 3 from 4B up: the base model keeps the text model, rotary_emb included, in
        # language_model. The layout is read there, and keys before RoPE can be derived.
        model = "standin/tiny-vision"
        manifest = self.capture("--queries", "8", "--k-pre-rope", "--dtype", "float32", model=model)
        self.assertEqual(manifest["config"]["rope_convention"], "rotate_half")
        tensors, _ = read_safetensors(os.path.join(self.out, "layer_002.safetensors"))
        seen = self.fake.created[-1].model.layers[2].self_attn.recorded
        want = torch.cat([s["k_pre_rope"][0] for s in seen], dim=1)
        self.assertTrue(torch.allclose(tensors["k_pre_rope"], want, rtol=1e-5, atol=1e-5))

    def test_a_base_model_with_an_lm_head_is_run_through_its_text_model(self):
        # transformers 4.51's Gemma 3: base_model is a ForCausalLM (its prefix names no attribute).
        # The tool finds the text model in .model, reads its rotary embedding and runs it, not the head.
        manifest = self.capture("--queries", "8", "--k-pre-rope", "--dtype", "float32", model="standin/tiny-lm-base")
        self.assertEqual(manifest["config"]["rope_convention"], "rotate_half")
        self.assertEqual(self.fake.created[-1].head_calls, 0)
        self.assertEqual(len(self.fake.created[-1].model.outputs), 3)  # one forward per sample

    def test_bad_inputs_refused_with_nothing_written(self):
        good = self.prompts()
        empty = self.prompt("empty.txt", " \n\t\n")
        short = self.prompt("short.txt", "too short")
        latin = os.path.join(self.tmp, "latin1.txt")
        with open(latin, "wb") as f:
            f.write(b"caf\xe9 " * 40)
        missing = os.path.join(self.tmp, "nowhere.txt")
        cases = [
            (["--prompts", good[0], missing], [missing, "no such file"]),
            (["--prompts", empty], [empty, "empty"]),
            (["--prompts", latin], [latin, "UTF-8"]),
            (["--prompts", short], [short, "10 tokens", "--queries 64"]),
            (["--prompts", *good, "--max-tokens", "20", "--queries", "32"], [good[0], "20 tokens", "--queries 32"]),
            (["--prompts", *good, "--layers", "0,3"], ["--layers 3", "3 layers"]),
            (["--prompts", *good, "--layers", "a,b"], ["--layers", "a,b"]),
            (["--prompts", *good, "--layers", "-1"], ["--layers"]),
            (["--prompts", *good, "--queries", "0"], ["--queries"]),
            (["--prompts", *good, "--model", "nobody/nothing"], ["--model nobody/nothing"]),
            (["--prompts", *good, "--out", os.path.join(self.tmp, "no", "dir")], ["--out", "does not exist"]),
        ]
        for extra, words in cases:
            with self.subTest(args=extra):
                rc, err = run_tool(["--model", MODEL, "--out", self.out, *extra])
                self.assertEqual(rc, 2, err)
                for word in words:
                    self.assertIn(word, err)
                self.assertEqual(self.leftovers(), [])

    def test_transformers_without_the_interface_refused(self):
        standin.install(version="4.50.3", with_attention_interface=False, with_mask_interface=False)
        rc, err = run_tool(["--model", MODEL, "--prompts", *self.prompts(), "--out", self.out])
        self.assertEqual(rc, 2)
        self.assertIn("AttentionInterface", err)
        self.assertIn("4.51", err)
        self.assertEqual(self.leftovers(), [])

    def test_failed_write_leaves_nothing(self):
        real, calls = tool.write_safetensors, []

        def second_fails(*args):
            calls.append(args[0])
            if len(calls) == 2:
                raise OSError(28, "No space left on device")
            real(*args)

        with mock.patch.object(tool, "write_safetensors", second_fails):
            rc, err = run_tool(["--model", MODEL, "--prompts", *self.prompts(), "--out", self.out, "--queries", "8"])
        self.assertEqual(rc, 1)
        self.assertIn("No space left", err)
        self.assertFalse(os.path.exists(calls[0]))  # the temporary directory is gone
        self.assertEqual(self.leftovers(), [])

    def test_missing_packages_refused(self):
        # A fresh interpreter (-I: no PYTHONPATH, no user site) in which an import of a hidden
        # package fails as if it were not installed (None in sys.modules) and the other one is
        # present (torch as installed, transformers an empty module), whatever is installed here.
        prompts = self.prompts()
        for hidden, names in ((["torch"], "torch"), (["transformers"], "transformers"),
                              (["torch", "transformers"], "torch and transformers")):
            with self.subTest(hidden=hidden):
                code = ("import runpy, sys, types\n"
                        "sys.modules['transformers'] = types.ModuleType('transformers')\n"
                        f"for name in {hidden!r}: sys.modules[name] = None\n"
                        f"sys.argv = [{TOOL!r}, '--model', {MODEL!r}, '--out', {self.out!r}, '--prompts', *{prompts!r}]\n"
                        f"runpy.run_path({TOOL!r}, run_name='__main__')\n")
                done = subprocess.run([sys.executable, "-I", "-B", "-c", code], capture_output=True, text=True,
                                      timeout=120)
                self.assertEqual(done.returncode, 2, done.stderr)
                self.assertIn(f"needs the Python package{'s' if len(hidden) > 1 else ''} {names}", done.stderr)
                self.assertEqual(self.leftovers(), [])


class ModelShapeTest(unittest.TestCase):
    """The manifest's config from model configs that differ from the stand-in's."""

    def gemma3(self, **extra):
        from types import SimpleNamespace
        fields = dict(num_attention_heads=8, num_key_value_heads=4, head_dim=256, hidden_size=2560,
                      num_hidden_layers=6, rope_theta=1000000.0, rope_scaling={"rope_type": "linear", "factor": 8.0},
                      rope_local_base_freq=10000.0, sliding_window=1024, max_position_embeddings=131072,
                      layer_types=["sliding_attention"] * 5 + ["full_attention"])
        fields.update(extra)
        return SimpleNamespace(**fields)

    def test_architecture_is_the_checkpoints_class(self):
        # A multimodal Gemma 3 keeps its shape in a text config; its class is the top config's.
        from types import SimpleNamespace
        text = self.gemma3()
        top = SimpleNamespace(architectures=["Gemma3ForConditionalGeneration"], get_text_config=lambda: text)
        self.assertEqual(tool.model_shape(top)["architecture"], "Gemma3ForConditionalGeneration")
        self.assertEqual(tool.model_shape(top)["num_hidden_layers"], 6)
        self.assertIsNone(tool.model_shape(self.gemma3())["architecture"])  # a config without one
        self.assertIsNone(tool.model_shape(self.gemma3(architectures=[]))["architecture"])

    def test_gemma3_rope_per_layer_type(self):
        # transformers 4.x Gemma 3: sliding layers use rope_local_base_freq without the scaling.
        shape = tool.model_shape(self.gemma3())
        self.assertEqual(shape["rope_theta"], 1000000.0)
        self.assertEqual(shape["rope_scaling"], {
            "full_attention": {"rope_type": "linear", "factor": 8.0},
            "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}})
        self.assertEqual(shape["sliding_layers"], [0, 1, 2, 3, 4])
        # One base for all layers (no sliding layer, or the same base): the scaling as it is.
        self.assertEqual(tool.model_shape(self.gemma3(rope_local_base_freq=1000000.0))["rope_scaling"],
                         {"rope_type": "linear", "factor": 8.0})
        self.assertEqual(tool.model_shape(self.gemma3(layer_types=["full_attention"] * 6, sliding_window=None))
                         ["rope_scaling"], {"rope_type": "linear", "factor": 8.0})

    def test_gemma3_rope_per_layer_type_under_transformers_5(self):
        # transformers 5: no rope_theta attribute, one rope_parameters per layer type, each with its base.
        per_type = {"full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1000000.0},
                    "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}}
        for local in (None, 10000.0):  # whether or not the config still has the 4.x attribute
            shape = tool.model_shape(self.gemma3(rope_theta=None, rope_scaling=None, rope_local_base_freq=local,
                                                 rope_parameters=per_type))
            self.assertIsNone(shape["rope_theta"])
            self.assertEqual(shape["rope_scaling"], per_type)
        # A flat rope_parameters of plain RoPE is still the format's null, with its base outside.
        flat = tool.model_shape(self.gemma3(rope_theta=None, rope_scaling=None, rope_local_base_freq=None,
                                            rope_parameters={"rope_type": "default", "rope_theta": 500000.0}))
        self.assertEqual(flat["rope_theta"], 500000.0)
        self.assertIsNone(flat["rope_scaling"])

    def test_logit_scale_and_softcap(self):
        # Gemma 3 27B scales by query_pre_attn_scalar 168; Gemma 2 also caps at 50; others have neither.
        shape = tool.model_shape(self.gemma3(query_pre_attn_scalar=168, attn_logit_softcapping=None))
        self.assertEqual(shape["query_pre_attn_scalar"], 168.0)
        self.assertIsNone(shape["attn_logit_softcapping"])
        shape = tool.model_shape(self.gemma3(query_pre_attn_scalar=256, attn_logit_softcapping=50.0))
        self.assertEqual(shape["attn_logit_softcapping"], 50.0)
        plain = tool.model_shape(self.gemma3())
        self.assertIsNone(plain["query_pre_attn_scalar"])
        self.assertIsNone(plain["attn_logit_softcapping"])


if __name__ == "__main__":
    unittest.main()
