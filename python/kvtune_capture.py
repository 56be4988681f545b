#!/usr/bin/env python3
"""Capture a Hugging Face causal LM's K/V cache (and queries) on your prompts for kvtune.

Runs the model on each prompt file and writes the capture directory described in
docs/real-caches.md ("The capture directory (format version 1)"): manifest.json and one
layer_NNN.safetensors per captured layer.

The tensors are taken at transformers' public attention hook: an attention function registered
with transformers.AttentionInterface and selected with attn_implementation=..., which every model
using the interface calls with the query, key and value it attends with. The function records
them and then computes the attention with the stock "sdpa" function, so the model's outputs are
those of attn_implementation="sdpa". A model that caps its attention logits (Gemma 2's
attn_logit_softcapping) attends with its own eager function instead, which applies the cap that
sdpa drops, so its outputs are those of attn_implementation="eager".

Needs torch and transformers (>= 4.51) and nothing else. Bad inputs: a message naming the file or
option, exit status 2, nothing written.
"""

import argparse
import ctypes
import importlib
import inspect
import json
import os
import shutil
import sys
import tempfile

TOOL_NAME = "kvtune_capture.py"
TOOL_VERSION = "1"
ATTN_NAME = "kvtune_capture"  # the name our attention function is registered under


class Refusal(Exception):
    """A bad input or an unsupported model: reported as one message, exit status 2."""


# ---------------------------------------------------------------------------------------------
# Command line


def parse_layers(text):
    try:
        layers = sorted({int(part) for part in text.split(",")})
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a comma-separated list of layer indices")
    if not layers or layers[0] < 0:
        raise argparse.ArgumentTypeError(f"'{text}': layer indices are 0 or more")
    return layers


def positive_int(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not an integer")
    if value < 1:
        raise argparse.ArgumentTypeError(f"'{text}': must be 1 or more")
    return value


def build_parser():
    p = argparse.ArgumentParser(
        prog="kvtune_capture.py",
        description="Record a causal LM's keys, values and queries on prompt files into a kvtune "
                    "capture directory (docs/real-caches.md).")
    p.add_argument("--model", required=True, help="model id or local path (from_pretrained)")
    p.add_argument("--prompts", required=True, nargs="+", metavar="FILE",
                   help="UTF-8 text files, one sample each, captured in this order")
    p.add_argument("--out", required=True, help="capture directory to create")
    p.add_argument("--layers", type=parse_layers, default=None,
                   help="comma-separated layer indices (default: every layer)")
    p.add_argument("--queries", type=positive_int, default=64, metavar="N",
                   help="keep the queries of the last N positions of each sample (default 64)")
    p.add_argument("--max-tokens", type=positive_int, default=None, metavar="N",
                   help="truncate each sample to its first N tokens")
    p.add_argument("--k-pre-rope", action="store_true",
                   help="also store the keys before RoPE (refused for models where they cannot be derived)")
    p.add_argument("--device", default=None, help="torch device (default: cuda if available, else cpu)")
    p.add_argument("--dtype", default="auto", choices=["auto", "float16", "bfloat16", "float32"],
                   help="dtype to load the model in (default: auto, the checkpoint's)")
    p.add_argument("--force", action="store_true",
                   help="replace an existing --out directory (only an earlier capture or an empty directory)")
    return p


# ---------------------------------------------------------------------------------------------
# Inputs checked before anything is loaded


def import_packages():
    """torch and transformers, or a Refusal naming what is missing."""
    missing, mods = [], {}
    for name in ("torch", "transformers"):
        try:
            mods[name] = importlib.import_module(name)
        except ImportError:
            missing.append(name)
    if missing:
        raise Refusal(f"this tool needs the Python package{'s' if len(missing) > 1 else ''} "
                      f"{' and '.join(missing)}, not installed for {sys.executable} "
                      f"(install with: {sys.executable} -m pip install {' '.join(missing)})")
    return mods["torch"], mods["transformers"]


def check_out(out, force):
    """Where the capture goes; refuses an existing --out unless --force may replace it."""
    out = os.path.abspath(out)
    parent = os.path.dirname(out)
    if not os.path.isdir(parent):
        raise Refusal(f"--out {out}: the parent directory {parent} does not exist")
    if os.path.lexists(out):
        if not force:
            raise Refusal(f"--out {out} already exists (add --force to replace it)")
        # --force replaces only what this tool could have made, never an arbitrary directory.
        if not os.path.isdir(out) or os.path.islink(out):
            raise Refusal(f"--out {out} exists and is not a directory; not replacing it even with --force")
        if os.listdir(out) and not is_capture(out):
            raise Refusal(f"--out {out} is a non-empty directory that is not a kvtune capture "
                          "(no manifest.json of format kvtune-capture); not replacing it even with --force")
    return out


def is_capture(path):
    try:
        with open(os.path.join(path, "manifest.json"), encoding="utf-8") as f:
            return json.load(f).get("format") == "kvtune-capture"
    except (OSError, ValueError, AttributeError):
        return False


def read_prompts(paths):
    prompts = []
    for path in paths:
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except FileNotFoundError:
            raise Refusal(f"--prompts {path}: no such file")
        except UnicodeDecodeError as e:
            raise Refusal(f"--prompts {path}: not UTF-8 text ({e.reason} at byte {e.start})")
        except OSError as e:
            raise Refusal(f"--prompts {path}: cannot read it ({e.strerror})")
        if not text.strip():
            raise Refusal(f"--prompts {path}: the prompt is empty")
        prompts.append((os.path.basename(path), path, text))
    return prompts


# ---------------------------------------------------------------------------------------------
# The model's shape, from its config


def text_config(config):
    # Multimodal configs keep the language model's fields in a sub-config; PretrainedConfig has
    # get_text_config() for that (transformers configuration_utils.py).
    get = getattr(config, "get_text_config", None)
    return get() if callable(get) else config


def architecture_of(config):
    names = getattr(config, "architectures", None)
    return names[0] if isinstance(names, (list, tuple)) and names and isinstance(names[0], str) else None


def model_shape(config):
    """The manifest's "config" object (docs/real-caches.md), rope_convention filled in later."""
    c = text_config(config)
    heads = c.num_attention_heads
    # head_dim falls back to hidden_size / heads, as the attention modules do
    # (models/qwen3/modeling_qwen3.py @ 9ee3f431: getattr(config, "head_dim", hidden // heads)).
    head_dim = getattr(c, "head_dim", None) or c.hidden_size // heads
    # transformers 5 keeps the RoPE base in config.rope_parameters["rope_theta"] (and the scaling
    # in the same dict, modeling_rope_utils.py); 4.x has config.rope_theta and config.rope_scaling.
    rope_params = getattr(c, "rope_parameters", None)
    theta = getattr(c, "rope_theta", None)
    if theta is None and isinstance(rope_params, dict):
        theta = rope_params.get("rope_theta")
    scaling = getattr(c, "rope_scaling", None)
    if scaling is None and isinstance(rope_params, dict):
        scaling = {k: v for k, v in rope_params.items() if k != "rope_theta"}
    # One rope_parameters per layer type (transformers 5's Gemma 3: {"full_attention": {...},
    # "sliding_attention": {...}}, each with its own rope_theta) is passed on as it is; kvtune reads it.
    per_layer_type = isinstance(scaling, dict) and bool(scaling) and all(isinstance(v, dict) for v in scaling.values())
    if isinstance(scaling, dict) and not per_layer_type \
            and scaling.get("rope_type", scaling.get("type")) in (None, "default"):
        scaling = None  # plain RoPE: the format's null
    n_layers = c.num_hidden_layers
    # Sliding layers: layer_types names them (models/qwen3/modeling_qwen3.py @ 9ee3f431 sets
    # sliding_window only where layer_types[i] == "sliding_attention"); older configs without it
    # slide every layer when sliding_window is set (and use_sliding_window, where present, is on).
    window = getattr(c, "sliding_window", None)
    layer_types = getattr(c, "layer_types", None)
    if layer_types:
        sliding = [i for i, t in enumerate(layer_types) if t == "sliding_attention"]
    elif window and getattr(c, "use_sliding_window", True):
        sliding = list(range(n_layers))
    else:
        sliding = []
    # Gemma 3 under transformers 4.x: sliding layers turn by rope_local_base_freq without the
    # scaling, the others by rope_theta with it (models/gemma3/modeling_gemma3.py, Gemma3TextModel's
    # rotary_emb_local). Written as transformers 5 keeps it, one rope_parameters per layer type,
    # which kvtune reads back per layer.
    local = getattr(c, "rope_local_base_freq", None)
    if not per_layer_type and local is not None and sliding and (theta is None or float(local) != float(theta)):
        scaling = {"full_attention": scaling if scaling is not None else {"rope_type": "default"},
                   "sliding_attention": {"rope_type": "default", "rope_theta": float(local)}}
    return {
        "num_hidden_layers": n_layers,
        "num_attention_heads": heads,
        "num_key_value_heads": getattr(c, "num_key_value_heads", None) or heads,
        "head_dim": head_dim,
        "rope_theta": None if theta is None else float(theta),
        "rope_scaling": jsonable(scaling),
        "rope_convention": "unknown",
        "max_position_embeddings": getattr(c, "max_position_embeddings", None),
        "sliding_window": window if sliding else None,
        "sliding_layers": sliding,
        # Gemma 2 and 3 scale logits by query_pre_attn_scalar^-0.5 (models/gemma2/modeling_gemma2.py
        # self.scaling), not head_dim^-0.5; Gemma 2 caps them by attn_logit_softcapping.
        "query_pre_attn_scalar": number_or_none(getattr(c, "query_pre_attn_scalar", None)),
        "attn_logit_softcapping": number_or_none(getattr(c, "attn_logit_softcapping", None)),
        # The checkpoint's class (the top config's, Gemma3ForConditionalGeneration for a multimodal
        # Gemma 3): runtimes size their caches by it (kvtune's runtime tables).
        "architecture": architecture_of(config),
    }


def number_or_none(value):
    return float(value) if value else None  # 0 and None alike: the model has none


def jsonable(value):
    return json.loads(json.dumps(value, default=str))


def version_tuple(text):
    parts = []
    for piece in str(text).split(".")[:2]:
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


# ---------------------------------------------------------------------------------------------
# The capture hook


class Recorder:
    """What the attention function saw, per captured layer, for the sample being run."""

    def __init__(self, layers, queries):
        self.layers, self.queries = set(layers), queries
        self.tokens = None  # the running sample's length; None: not recording
        self.seen = {}      # layer -> (k, v, q) on the CPU, for the running sample

    def record(self, module, query, key, value):
        if self.tokens is None:
            return
        layer = getattr(module, "layer_idx", None)
        if layer is None:
            raise Refusal(f"the model's attention module {type(module).__name__} has no layer_idx; "
                          "cannot tell which layer called the attention function")
        if layer not in self.layers:
            return
        if layer in self.seen:
            raise Refusal(f"layer {layer} called the attention function twice in one forward; "
                          "this model is not supported")
        t = self.tokens
        # [batch, heads, seq, head_dim], key/value with the KV heads, before any repeat_kv
        # (integrations/sdpa_attention.py @ 00c238bd repeats them inside the attention function).
        if query.dim() != 4 or key.dim() != 4 or query.shape[0] != 1 or key.shape[2] != t or query.shape[2] != t:
            raise Refusal(f"layer {layer}: the attention function got query {tuple(query.shape)} and key "
                          f"{tuple(key.shape)}; expected [1, heads, {t}, head_dim] (one sample, no cache)")
        cpu = lambda x: x.detach().to("cpu", copy=True)  # noqa: E731 - off the GPU, owned by us
        self.seen[layer] = (cpu(key[0]), cpu(value[0]), cpu(query[0, :, t - self.queries:, :]))


def eager_attention_of(module):
    """The eager attention function of the module's own modeling file, which applies a softcap."""
    # Gemma 2's attention calls fn(..., softcap=self.attn_logit_softcapping); its file's
    # eager_attention_forward caps the logits, the stock sdpa function leaves softcap in **kwargs
    # unused (models/gemma2/modeling_gemma2.py and integrations/sdpa_attention.py @ def9a7ef).
    fn = getattr(sys.modules.get(type(module).__module__), "eager_attention_forward", None)
    if fn is None:
        raise Refusal(f"{type(module).__name__} caps its attention logits, but its modeling file "
                      f"({type(module).__module__}) has no eager_attention_forward to apply the cap with")
    return fn


def register_attention(transformers, recorder, softcap=False):
    """Registers the capture attention function (and the mask it needs); returns its name. With
    softcap, the model's own eager attention computes the output, with the eager (additive) mask."""
    # The stock SDPA attention, looked up where the models look it up: ALL_ATTENTION_FUNCTIONS in
    # transformers.modeling_utils (docs/source/en/attention_interface.md @ 68c570d3, "Accessing
    # current available implementations").
    sdpa = importlib.import_module("transformers.modeling_utils").ALL_ATTENTION_FUNCTIONS["sdpa"]

    def kvtune_capture_attention(module, query, key, value, attention_mask, *args, **kwargs):
        # The models call fn(module, query, key, value, attention_mask, dropout=..., scaling=...,
        # **kwargs) after RoPE (models/qwen3/modeling_qwen3.py @ 9ee3f431, Qwen3Attention.forward;
        # models/llama/modeling_llama.py @ 5dd4a635); everything is passed on unchanged.
        recorder.record(module, query, key, value)
        if not softcap:
            return sdpa(module, query, key, value, attention_mask, *args, **kwargs)
        if attention_mask is None:
            # eager attention takes causality from the mask alone; without one it would look ahead.
            raise Refusal(f"layer {module.layer_idx}: the model passed no attention mask, which its eager "
                          "attention (needed for the logit softcap) requires")
        return eager_attention_of(module)(module, query, key, value, attention_mask, *args, **kwargs)

    # AttentionInterface.register is a classmethod updating the mapping every instance reads,
    # including ALL_ATTENTION_FUNCTIONS (transformers PR #36889, first released in 4.51;
    # attention_interface.md @ 68c570d3 registers and then loads with attn_implementation=name).
    transformers.AttentionInterface.register(ATTN_NAME, kvtune_capture_attention)
    # From 4.53 the masks come from masking_utils, which skips mask creation (attention_mask=None)
    # for a name without a registered mask function (masking_utils.py @ 00c4411c,
    # _preprocess_mask_arguments; attention_interface.md "Attention Mask Interface"). Registering
    # sdpa's mask function under our name gives every layer the mask stock sdpa gets, sliding
    # windows included (eager's, an additive mask that is never left out, for the eager function
    # a softcap needs). Before 4.53 there is no AttentionMaskInterface: the models build their own
    # 4D mask (modeling_llama.py _update_causal_mask), which sdpa then gets.
    mask_interface = getattr(transformers, "AttentionMaskInterface", None)
    if mask_interface is not None:
        masks = importlib.import_module("transformers.masking_utils").ALL_MASK_ATTENTION_FUNCTIONS
        mask_interface.register(ATTN_NAME, masks["eager" if softcap else "sdpa"])
    return ATTN_NAME


# ---------------------------------------------------------------------------------------------
# RoPE: the model's own cos/sin, for keys before RoPE


def rotate_half(torch, x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def language_model(base):
    """The text model, which holds the layers and the rotary embedding: the base model itself, or
    the language model a multimodal one wraps. The capture runs it (no LM head, no vision tower)."""
    # Gemma 3 from 4B up loads as Gemma3ForConditionalGeneration, whose base model (Gemma3Model)
    # keeps Gemma3TextModel, rotary_emb included, in language_model (models/gemma3/modeling_gemma3.py,
    # 5.0.0.dev0; models/auto/modeling_auto.py maps "gemma3" to it for causal LM). Wrappers of the
    # older pattern (PaliGemma's, LLaVA's) keep a ForCausalLM there, the text model in its .model.
    # In 4.51 Gemma3PreTrainedModel.base_model_prefix is "language_model", so base_model is a
    # ForCausalLM itself (Gemma3ForCausalLM, or the one the multimodal class holds): its .model.
    inner = getattr(base, "language_model", None)
    if inner is not None:
        return inner if hasattr(inner, "rotary_emb") else getattr(inner, "model", inner)
    if not hasattr(base, "rotary_emb") and hasattr(getattr(base, "model", None), "rotary_emb"):
        return base.model
    return base


class Rope:
    """The model's rotary embedding, if it can be used to undo the rotation; else why not."""

    def __init__(self, torch, base, head_dim):
        self.torch, self.head_dim = torch, head_dim
        self.module, self.problem, self.layer_type = None, None, None
        # Llama-family base models hold one rotary embedding, rotary_emb, called as
        # rotary_emb(x, position_ids) -> (cos, sin) in x's dtype, shaped [batch, seq, head_dim]
        # (models/qwen3/modeling_qwen3.py @ 9ee3f431, Qwen3Model.__init__ and
        # Qwen3RotaryEmbedding.forward; the attention applies it as x*cos + rotate_half(x)*sin).
        module = getattr(base, "rotary_emb", None)
        others = [n for n, _ in base.named_children() if "rotary" in n and n != "rotary_emb"] \
            if hasattr(base, "named_children") else []
        # Gemma 3 under transformers 4.x adds rotary_emb_local, of the same class, for its sliding
        # layers (models/gemma3/modeling_gemma3.py): the layout is the class's, so rotary_emb shows
        # it, but one cos/sin cannot undo every layer (per_layer_problem refuses --k-pre-rope).
        self.per_layer_problem = None
        if others and module is not None and all(type(getattr(base, n, None)) is type(module) for n in others):
            names = ", ".join(["rotary_emb"] + others)
            self.per_layer_problem = f"the model has more than one rotary embedding ({names})"
            others = []
        config = text_config(base.config) if hasattr(base, "config") else None
        if module is None or not callable(module):
            self.problem = "the model has no rotary_emb module on its base model"
        elif others:
            self.problem = f"the model has more than one rotary embedding ({', '.join(['rotary_emb'] + others)})"
        elif config is not None and any(getattr(config, k, None) for k in ("no_rope_layers", "nope_layer_interval")):
            self.problem = "some of the model's layers do not apply RoPE (no_rope_layers / nope_layer_interval)"
        else:
            try:
                params = list(inspect.signature(module.forward).parameters)
            except (TypeError, ValueError):
                params = []
            types = list(getattr(config, "layer_types", None) or [])
            if params[2:] == ["layer_type"] and types:
                # Gemma 3 under transformers 5: one module turns each layer type by its own base,
                # forward(x, position_ids, layer_type) (models/gemma3/modeling_gemma3.py, 5.0.0.dev0).
                # Every type has the class's layout, so layer 0's type shows it; one cos/sin cannot
                # undo every layer.
                self.module, self.layer_type = module, types[0]
                self.per_layer_problem = ("its rotary_emb turns each layer type by its own base "
                                          "(forward takes layer_type)")
            elif len(params) > 2:  # another argument: one cos/sin would not fit every layer
                self.problem = f"its rotary_emb.forward takes ({', '.join(params)}), not (x, position_ids)"
            else:
                self.module = module

    def cos_sin(self, dtype, device, tokens):
        """(cos, sin, layout): cos and sin [tokens, head_dim] exactly as the model computes them and
        "rotate_half" (both halves of the head share each angle: dimension i pairs with
        i + head_dim/2) or "interleaved" (neighbours share it: 2i pairs with 2i+1). None, with
        self.problem set, if neither."""
        torch = self.torch
        x = torch.zeros(1, 1, dtype=dtype, device=device)
        positions = torch.arange(tokens, device=device)[None, :]
        try:
            with torch.no_grad():
                typed = {"layer_type": self.layer_type} if self.layer_type else {}
                cos, sin = self.module(x, positions, **typed)
        except Exception as e:  # noqa: BLE001 - any failure means we cannot use it
            self.problem = f"calling rotary_emb(x, position_ids) failed ({type(e).__name__}: {e})"
            return None
        want = (1, tokens, self.head_dim)
        if tuple(cos.shape) != want or tuple(sin.shape) != want:
            self.problem = (f"rotary_emb returned cos {tuple(cos.shape)}, expected {want} "
                            "(a partial rotary embedding is not supported)")
            return None
        cos, sin = cos[0].to("cpu"), sin[0].to("cpu")
        half = self.head_dim // 2
        if torch.equal(cos[:, :half], cos[:, half:]) and torch.equal(sin[:, :half], sin[:, half:]):
            return cos, sin, "rotate_half"
        if torch.equal(cos[:, 0::2], cos[:, 1::2]) and torch.equal(sin[:, 0::2], sin[:, 1::2]):
            self.problem = "its rotary embedding is interleaved (pairs 2i, 2i+1), not the rotate_half layout"
            return cos, sin, "interleaved"
        self.problem = "rotary_emb's cos/sin are neither in the rotate_half nor in the interleaved layout"
        return None

    def unrotate(self, key, cos, sin):
        """Keys before RoPE from keys after it: the inverse rotation, in float64, then the key's
        dtype. y = x*c + rotate_half(x)*s rotates each pair by an angle and scales it by
        sqrt(c^2 + s^2), so x = (y*c - rotate_half(y)*s) / (c^2 + s^2)."""
        torch = self.torch
        y, c, s = key.double(), cos.double(), sin.double()
        return ((y * c - rotate_half(torch, y) * s) / (c * c + s * s)).to(key.dtype)


# ---------------------------------------------------------------------------------------------
# Safetensors, written here (https://github.com/huggingface/safetensors, "Format")

SAFETENSORS_DTYPES = {"float16": "F16", "bfloat16": "BF16", "float32": "F32", "float64": "F64", "int64": "I64"}


def dtype_name(dtype):
    return str(dtype).replace("torch.", "")


def write_safetensors(path, tensors, metadata):
    """tensors: {name: CPU tensor}. An 8-byte little-endian header length, the JSON header
    (__metadata__, then each tensor's dtype, shape and [begin, end) in the data), padded with
    spaces to a multiple of 8 as the reference writer does, then the data with no holes. Tensors
    go largest element first (then by name), as the reference writer orders them, so each starts
    aligned to its element size."""
    if sys.byteorder != "little":
        raise Refusal("this tool writes tensors as they lie in memory and needs a little-endian machine")
    order = sorted(tensors, key=lambda n: (-tensors[n].element_size(), n))
    header, at = {"__metadata__": metadata}, 0
    for name in order:
        t = tensors[name]
        size = t.numel() * t.element_size()
        header[name] = {"dtype": SAFETENSORS_DTYPES[dtype_name(t.dtype)], "shape": list(t.shape),
                        "data_offsets": [at, at + size]}
        at += size
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(len(text).to_bytes(8, "little"))
        f.write(text)
        for name in order:
            t = tensors[name].contiguous()
            # The raw bytes, no conversion: f16/bf16 exactly as the model held them. One slice of
            # the first axis at a time, so a large tensor is not copied whole.
            for piece in (t if t.dim() > 1 else [t]):
                if piece.numel():
                    f.write(ctypes.string_at(piece.data_ptr(), piece.numel() * piece.element_size()))
        f.flush()
        os.fsync(f.fileno())


# ---------------------------------------------------------------------------------------------
# The run


def load(torch, transformers, args):
    name = args.model
    dtype = "auto" if args.dtype == "auto" else getattr(torch, args.dtype)
    # transformers 4.56 renamed from_pretrained's torch_dtype to dtype, keeping torch_dtype as a
    # deprecated alias (transformers PR #39782).
    dtype_kw = "dtype" if version_tuple(transformers.__version__) >= (4, 56) else "torch_dtype"
    try:
        config = transformers.AutoConfig.from_pretrained(name)
    except Exception as e:  # noqa: BLE001 - from_pretrained raises many kinds for a bad id or path
        raise Refusal(f"--model {name}: cannot load its config ({type(e).__name__}: {e})")
    shape = model_shape(config)
    n_layers = shape["num_hidden_layers"]
    layers = args.layers if args.layers is not None else list(range(n_layers))
    bad = [l for l in layers if l >= n_layers]
    if bad:
        raise Refusal(f"--layers {','.join(map(str, bad))}: out of range, the model has {n_layers} layers (0..{n_layers - 1})")
    try:
        tokenizer = transformers.AutoTokenizer.from_pretrained(name)
    except Exception as e:  # noqa: BLE001
        raise Refusal(f"--model {name}: cannot load its tokenizer ({type(e).__name__}: {e})")
    return config, shape, layers, tokenizer, dtype, dtype_kw


def tokenize(tokenizer, prompts, args):
    samples = []
    for name, path, text in prompts:
        ids = tokenizer(text, return_tensors="pt")["input_ids"]
        if args.max_tokens is not None:
            ids = ids[:, :args.max_tokens]
        if ids.shape[1] < args.queries:
            raise Refusal(f"--prompts {path}: {ids.shape[1]} tokens, fewer than --queries {args.queries}")
        samples.append((name, ids))
    return samples


def capture(args):
    out = check_out(args.out, args.force)
    torch, transformers = import_packages()
    if not hasattr(transformers, "AttentionInterface"):
        raise Refusal(f"transformers {transformers.__version__} has no AttentionInterface; "
                      "this tool needs transformers 4.51 or later")
    prompts = read_prompts(args.prompts)
    config, shape, layers, tokenizer, dtype, dtype_kw = load(torch, transformers, args)
    samples = tokenize(tokenizer, prompts, args)

    recorder = Recorder(layers, args.queries)
    attn = register_attention(transformers, recorder, softcap=bool(shape["attn_logit_softcapping"]))
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    model = transformers.AutoModelForCausalLM.from_pretrained(args.model, attn_implementation=attn, **{dtype_kw: dtype})
    model.to(device)
    model.eval()
    # The text model (no LM head): its outputs are all the capture needs, and the logits of a long
    # sample over a large vocabulary would be the biggest tensor of the run.
    base = language_model(getattr(model, "base_model", model))

    rope = Rope(torch, base, shape["head_dim"])
    if args.k_pre_rope and rope.problem:
        raise Refusal(f"--k-pre-rope: cannot derive keys before RoPE for this model: {rope.problem}")

    kept = {l: {"k": [], "v": [], "q": [], "k_pre_rope": []} for l in layers}
    positions, q_positions, dtypes, convention = [], [], set(), None
    for name, ids in samples:
        t = ids.shape[1]
        recorder.tokens, recorder.seen = t, {}
        with torch.no_grad():
            base(input_ids=ids.to(device), use_cache=False)
        recorder.tokens = None
        missing = [l for l in layers if l not in recorder.seen]
        if missing:
            raise Refusal(f"layer{'s' if len(missing) > 1 else ''} {','.join(map(str, missing))} did not call the "
                          "attention function (not attention layers, or a model that bypasses AttentionInterface)")
        cos_sin = None
        if convention is None or args.k_pre_rope:
            probe = rope.cos_sin(recorder.seen[layers[0]][0].dtype, device, t) if rope.module else None
            # The manifest's rope_convention is what the model's own cos/sin show; "unknown" where
            # they cannot be had.
            convention = probe[2] if probe is not None else "unknown"
            if args.k_pre_rope:
                if convention != "rotate_half" or rope.per_layer_problem:
                    why = rope.per_layer_problem if convention == "rotate_half" else rope.problem
                    raise Refusal(f"--k-pre-rope: cannot derive keys before RoPE for this model: {why}")
                cos_sin = probe[:2]
        for l in layers:
            k, v, q = recorder.seen[l]
            if k.shape[-1] != shape["head_dim"] or k.shape[0] != shape["num_key_value_heads"] \
                    or q.shape[0] != shape["num_attention_heads"]:
                raise Refusal(f"layer {l}: key {tuple(k.shape)} and query {tuple(q.shape)} do not match the config "
                              f"({shape['num_key_value_heads']} KV heads, {shape['num_attention_heads']} query heads, "
                              f"head_dim {shape['head_dim']})")
            dtypes.update({k.dtype, v.dtype, q.dtype})
            kept[l]["k"].append(k)
            kept[l]["v"].append(v)
            kept[l]["q"].append(q)
            if args.k_pre_rope:
                kept[l]["k_pre_rope"].append(rope.unrotate(k, *cos_sin))
        positions.append(torch.arange(t, dtype=torch.int64))
        q_positions.append(torch.arange(t - args.queries, t, dtype=torch.int64))
    if len(dtypes) != 1:
        raise Refusal(f"the attention inputs came in several dtypes ({', '.join(sorted(map(dtype_name, dtypes)))})")
    shape["rope_convention"] = convention

    manifest = {
        "format": "kvtune-capture",
        "version": 1,
        "tool": {"name": TOOL_NAME, "version": TOOL_VERSION,
                 "torch": str(torch.__version__), "transformers": str(transformers.__version__)},
        "model": args.model,
        "config": shape,
        "dtype": dtype_name(dtypes.pop()),
        "layers": layers,
        "layer_files": [f"layer_{l:03d}.safetensors" for l in layers],
        "samples": [{"name": name, "tokens": int(ids.shape[1])} for name, ids in samples],
        "queries_per_sample": args.queries,
        "k_pre_rope": bool(args.k_pre_rope),
    }
    write_capture(torch, out, manifest, kept, torch.cat(positions), torch.cat(q_positions))
    total = sum(s["tokens"] for s in manifest["samples"])
    print(f"kvtune_capture: wrote {out}: {len(layers)} layers, {len(samples)} samples, {total} tokens, "
          f"{manifest['dtype']}")


def write_capture(torch, out, manifest, kept, positions, q_positions):
    """Everything goes into a temporary sibling directory, renamed to --out at the end: a failed
    run leaves nothing, and --force replaces the old capture only once the new one is complete."""
    parent, base = os.path.split(out)
    tmp = tempfile.mkdtemp(prefix=f".{base}.tmp-", dir=parent)
    old = None
    try:
        for l, file in zip(manifest["layers"], manifest["layer_files"]):
            tensors = {name: torch.cat(kept[l][name], dim=1) for name in ("k", "v", "q")}
            if manifest["k_pre_rope"]:
                tensors["k_pre_rope"] = torch.cat(kept[l]["k_pre_rope"], dim=1)
            tensors["positions"], tensors["q_positions"] = positions, q_positions
            write_safetensors(os.path.join(tmp, file), tensors, {"format": "kvtune-capture", "layer": str(l)})
            del kept[l]  # free each layer once written
        with open(os.path.join(tmp, "manifest.json"), "w", encoding="utf-8") as f:
            json.dump(manifest, f, indent=2)
            f.write("\n")
        if os.path.lexists(out):
            old = tempfile.mkdtemp(prefix=f".{base}.old-", dir=parent)
            os.rename(out, os.path.join(old, base))
        os.rename(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        if old is not None and not os.path.lexists(out):
            os.rename(os.path.join(old, base), out)  # put the previous capture back
        raise
    finally:
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)


def main(argv=None):
    args = build_parser().parse_args(argv)
    try:
        capture(args)
    except Refusal as e:
        print(f"kvtune_capture: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"kvtune_capture: cannot write the capture: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
