"""A stand-in for transformers and a tiny causal LM, for testing python/kvtune_capture.py where
transformers is not installed.

install() puts a fake `transformers` package into sys.modules with the parts the capture tool
uses, shaped like the real ones (written from transformers' sources, none of their code copied):

- AttentionInterface: register() is a classmethod writing into a mapping shared by every instance,
  ALL_ATTENTION_FUNCTIONS (transformers.modeling_utils) is one, with a stock "sdpa" entry. "eager"
  is not in it: a model with attn_implementation="eager" calls its own file's
  eager_attention_forward (here this module's), as transformers' models do.
- AttentionMaskInterface / masking_utils.ALL_MASK_ATTENTION_FUNCTIONS: the mask functions ("sdpa":
  None for plain causal attention, else boolean; "eager": always an additive float mask); as in
  transformers' masking_utils, a model whose attention name has no mask function gets no mask.
- AutoConfig / AutoModelForCausalLM / AutoTokenizer.from_pretrained.

The model is Llama-shaped: GQA (4 query heads over 2 KV heads, head_dim 16), RoPE in the
rotate_half layout from base.rotary_emb(x, position_ids), layer 1 a sliding-window layer. Its
attention module calls ALL_ATTENTION_FUNCTIONS[config._attn_implementation](self, q, k, v, mask,
dropout=..., scaling=..., sliding_window=...) with q [B, Hq, T, D] and k, v [B, Hkv, T, D] after
RoPE, as LlamaAttention does (plus softcap=, as Gemma2Attention does), and records its own inputs
in `self.recorded` (written by the model, not by the tool) so a test can compare them with what the
tool captured. Variants: interleaved RoPE, a second rotary module for the sliding layers (Gemma 3
under transformers 4.x), one rotary module taking the layer type (transformers 5), a logit softcap
(Gemma 2), and a multimodal base model keeping the text model in language_model (Gemma 3 4B+).

Matrix products run in float32 and round back to the model's dtype: torch 1.13 has no float16
matmul on the CPU. That changes the numbers, not what the tool sees.
"""

import sys
import types

import torch
import torch.nn.functional as F


class StandInConfig:
    model_type = "standin"

    def __init__(self, version, interleaved=False, local_rope=False, softcap=False, typed_rope=False):
        self.architectures = ["StandInForCausalLM"]
        self.vocab_size = 257  # bytes and a BOS token
        self.hidden_size = 64
        self.intermediate_size = 96
        self.num_hidden_layers = 3
        self.num_attention_heads = 4
        self.num_key_value_heads = 2
        self.head_dim = 16
        self.max_position_embeddings = 512
        self.sliding_window = 8
        self.layer_types = ["full_attention", "sliding_attention", "full_attention"]
        self.rms_norm_eps = 1e-6
        self.interleaved = interleaved  # a GPT-J-style rotation, which the tool must refuse to invert
        # Gemma 3 under transformers 4.x: the sliding layers turn by their own base through a second
        # rotary module (rotary_emb_local), without the global layers' scaling.
        self.rope_local_base_freq = 1000.0 if local_rope else None
        # Gemma 2 caps its attention logits at c·tanh(l/c); 1.0 caps most of the stand-in's.
        self.attn_logit_softcapping = 1.0 if softcap else None
        # transformers 5 keeps RoPE in rope_parameters; 4.x in rope_theta / rope_scaling.
        # Gemma 3 under transformers 5 (typed_rope): one rope_parameters per layer type, and one
        # rotary module taking the layer type.
        self.typed_rope = typed_rope
        if typed_rope:
            self.rope_parameters = {"full_attention": {"rope_type": "default", "rope_theta": 10000.0},
                                    "sliding_attention": {"rope_type": "default", "rope_theta": 1000.0}}
        elif version[0] >= 5:
            self.rope_parameters = {"rope_type": "default", "rope_theta": 10000.0}
        else:
            self.rope_theta = 10000.0
            self.rope_scaling = None
        self._attn_implementation = None


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def linear(x, layer):
    return F.linear(x.float(), layer.weight.float()).to(x.dtype)


class RMSNorm(torch.nn.Module):
    def __init__(self, size, eps):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(size))
        self.eps = eps

    def forward(self, x):
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return (self.weight.float() * h).to(x.dtype)


class RotaryEmbedding(torch.nn.Module):
    def __init__(self, config, theta=None):
        super().__init__()
        d = config.head_dim
        theta = theta or getattr(config, "rope_theta", None) or config.rope_parameters["rope_theta"]
        self.register_buffer("inv_freq", 1.0 / theta ** (torch.arange(0, d, 2).float() / d), persistent=False)
        self.interleaved = config.interleaved

    @torch.no_grad()
    def forward(self, x, position_ids):
        freqs = position_ids[:, :, None].float() * self.inv_freq[None, None, :]
        emb = freqs.repeat_interleave(2, dim=-1) if self.interleaved else torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)


class TypedRotaryEmbedding(torch.nn.Module):
    """transformers 5's Gemma 3 form: forward(x, position_ids, layer_type), each type its own base."""

    def __init__(self, config):
        super().__init__()
        self.types = torch.nn.ModuleDict({t: RotaryEmbedding(config, theta=p["rope_theta"])
                                          for t, p in config.rope_parameters.items()})

    def forward(self, x, position_ids, layer_type=None):
        return self.types[layer_type](x, position_ids)


def rotate(x, cos, sin, interleaved):
    cos, sin = cos[:, None], sin[:, None]
    if interleaved:
        pairs = torch.stack((-x[..., 1::2], x[..., 0::2]), dim=-1).flatten(-2)
        return x * cos + pairs * sin
    return x * cos + rotate_half(x) * sin


class Attention(torch.nn.Module):
    def __init__(self, config, layer_idx):
        super().__init__()
        self.config, self.layer_idx = config, layer_idx
        self.head_dim = config.head_dim
        self.num_key_value_groups = config.num_attention_heads // config.num_key_value_heads
        self.scaling = self.head_dim ** -0.5
        self.is_causal = True
        self.sliding_window = config.sliding_window if config.layer_types[layer_idx] == "sliding_attention" else None
        h, d = config.hidden_size, config.head_dim
        self.q_proj = torch.nn.Linear(h, config.num_attention_heads * d, bias=False)
        self.k_proj = torch.nn.Linear(h, config.num_key_value_heads * d, bias=False)
        self.v_proj = torch.nn.Linear(h, config.num_key_value_heads * d, bias=False)
        self.o_proj = torch.nn.Linear(config.num_attention_heads * d, h, bias=False)
        self.recorded = []  # the model's own record of its attention inputs, one dict per forward

    def forward(self, hidden, position_embeddings, attention_mask):
        b, t, _ = hidden.shape
        shape = (b, t, -1, self.head_dim)
        q = linear(hidden, self.q_proj).view(shape).transpose(1, 2)
        k = linear(hidden, self.k_proj).view(shape).transpose(1, 2)
        v = linear(hidden, self.v_proj).view(shape).transpose(1, 2)
        cos, sin = position_embeddings
        k_pre = k
        q = rotate(q, cos, sin, self.config.interleaved)
        k = rotate(k, cos, sin, self.config.interleaved)
        self.recorded.append({"q": q.clone(), "k": k.clone(), "v": v.clone(), "k_pre_rope": k_pre.clone()})
        impl = self.config._attn_implementation
        fn = eager_attention_forward if impl == "eager" else \
            sys.modules["transformers"].modeling_utils.ALL_ATTENTION_FUNCTIONS[impl]
        out, _ = fn(self, q, k, v, attention_mask, dropout=0.0, scaling=self.scaling,
                    sliding_window=self.sliding_window, softcap=self.config.attn_logit_softcapping)
        return linear(out.reshape(b, t, -1), self.o_proj)


class DecoderLayer(torch.nn.Module):
    def __init__(self, config, layer_idx):
        super().__init__()
        self.self_attn = Attention(config, layer_idx)
        self.input_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.up = torch.nn.Linear(config.hidden_size, config.intermediate_size, bias=False)
        self.down = torch.nn.Linear(config.intermediate_size, config.hidden_size, bias=False)

    def forward(self, hidden, position_embeddings, attention_mask):
        hidden = hidden + self.self_attn(self.input_layernorm(hidden), position_embeddings, attention_mask)
        h = linear(self.post_attention_layernorm(hidden), self.up)
        return hidden + linear(F.gelu(h.float()).to(h.dtype), self.down)


class BaseOutput:
    def __init__(self, last_hidden_state):
        self.last_hidden_state = last_hidden_state


class CausalLMOutput:
    def __init__(self, logits):
        self.logits = logits


class StandInModel(torch.nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.embed_tokens = torch.nn.Embedding(config.vocab_size, config.hidden_size)
        self.layers = torch.nn.ModuleList(DecoderLayer(config, i) for i in range(config.num_hidden_layers))
        self.norm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.rotary_emb = TypedRotaryEmbedding(config) if config.typed_rope else RotaryEmbedding(config)
        if config.rope_local_base_freq:
            self.rotary_emb_local = RotaryEmbedding(config, theta=config.rope_local_base_freq)
        self.outputs = []  # every forward's last hidden state, recorded by the model

    def forward(self, input_ids, use_cache=None):
        hidden = self.embed_tokens(input_ids)
        t = input_ids.shape[1]
        positions = torch.arange(t)[None, :]
        if self.config.typed_rope:
            cos_sin = self.rotary_emb(hidden, positions, layer_type="full_attention")
            local = self.rotary_emb(hidden, positions, layer_type="sliding_attention")
        else:
            cos_sin = self.rotary_emb(hidden, positions)
            local = self.rotary_emb_local(hidden, positions) if self.config.rope_local_base_freq else cos_sin
        # As in transformers' masking_utils: a mask only for an attention name with a registered
        # mask function; otherwise attention_mask=None.
        masks = sys.modules["transformers"].masking_utils.ALL_MASK_ATTENTION_FUNCTIONS
        impl = self.config._attn_implementation
        made = impl in masks._global_mapping
        full = masks[impl](t, None) if made else None
        sliding = masks[impl](t, self.config.sliding_window) if made else None
        for layer in self.layers:
            mask = sliding if layer.self_attn.sliding_window else full
            hidden = layer(hidden, local if layer.self_attn.sliding_window else cos_sin, mask)
        hidden = self.norm(hidden)
        self.outputs.append(hidden.clone())
        return BaseOutput(hidden)


class VisionWrapperModel(torch.nn.Module):
    """Gemma3Model's shape: a multimodal base model keeping the text model in language_model."""

    def __init__(self, config):
        super().__init__()
        self.config = config
        self.vision_tower = torch.nn.Linear(4, 4, bias=False)
        self.language_model = StandInModel(config)

    @property
    def layers(self):
        return self.language_model.layers

    @property
    def outputs(self):
        return self.language_model.outputs

    def forward(self, input_ids, use_cache=None):
        return self.language_model(input_ids, use_cache=use_cache)


class StandInForCausalLM(torch.nn.Module):
    base_model_prefix = "model"

    def __init__(self, config, vision=False):
        super().__init__()
        self.config = config
        self.model = VisionWrapperModel(config) if vision else StandInModel(config)
        self.head_calls = 0  # forwards through the LM head
        self.lm_head = torch.nn.Linear(config.hidden_size, config.vocab_size, bias=False)

    @property
    def base_model(self):
        # PreTrainedModel.base_model: the model itself when it has no attribute of that name (4.51's
        # Gemma3ForCausalLM, whose prefix is "language_model").
        return getattr(self, self.base_model_prefix, self)

    def forward(self, input_ids, use_cache=None):
        self.head_calls += 1
        hidden = self.model(input_ids, use_cache=use_cache).last_hidden_state
        return CausalLMOutput(linear(hidden, self.lm_head))


# The stock attention and mask functions, the stand-in's "sdpa": written for torch 1.13, which has
# no scaled_dot_product_attention.

def sdpa_mask(tokens, sliding_window):
    """None when plain causal attention is meant (stock sdpa then uses is_causal), else a boolean
    [1, 1, T, T] mask, True where a query may attend a key."""
    if sliding_window is None:
        return None
    i = torch.arange(tokens)[:, None]
    j = torch.arange(tokens)[None, :]
    return ((j <= i) & (j > i - sliding_window))[None, None]


def sdpa_attention(module, query, key, value, attention_mask, dropout=0.0, scaling=None, is_causal=None, **kwargs):
    groups = module.num_key_value_groups
    k = key.repeat_interleave(groups, dim=1).float()
    v = value.repeat_interleave(groups, dim=1).float()
    scores = query.float() @ k.transpose(-1, -2) * scaling
    t, s = query.shape[2], key.shape[2]
    allowed = attention_mask if attention_mask is not None else torch.ones(t, s, dtype=torch.bool).tril()
    scores = scores.masked_fill(~allowed, float("-inf"))
    out = (scores.softmax(-1) @ v).to(query.dtype)
    return out.transpose(1, 2).contiguous(), None


def eager_mask(tokens, sliding_window):
    """An additive float [1, 1, T, T] mask, 0 where a query may attend a key and the float32
    minimum elsewhere; never None, even for plain causal attention."""
    i = torch.arange(tokens)[:, None]
    j = torch.arange(tokens)[None, :]
    allowed = (j <= i) & (j > i - sliding_window) if sliding_window is not None else j <= i
    return torch.zeros(tokens, tokens).masked_fill(~allowed, torch.finfo(torch.float32).min)[None, None]


def eager_attention_forward(module, query, key, value, attention_mask, dropout=0.0, scaling=None, softcap=None,
                            **kwargs):
    """The model file's own attention: the logits capped at softcap·tanh(l/softcap) when softcap is
    set, then the additive mask (causality comes from the mask alone)."""
    groups = module.num_key_value_groups
    k = key.repeat_interleave(groups, dim=1).float()
    v = value.repeat_interleave(groups, dim=1).float()
    scores = query.float() @ k.transpose(-1, -2) * scaling
    if softcap is not None:
        scores = torch.tanh(scores / softcap) * softcap
    if attention_mask is not None:
        scores = scores + attention_mask[:, :, :, :key.shape[2]]
    out = (scores.softmax(-1) @ v).to(query.dtype)
    return out.transpose(1, 2).contiguous(), None


# ---------------------------------------------------------------------------------------------
# The fake transformers package


def make_interface(name, stock):
    class Interface:
        _global_mapping = dict(stock)

        def __init__(self):
            self._local_mapping = {}

        def __getitem__(self, key):
            if key in self._local_mapping:
                return self._local_mapping[key]
            return self._global_mapping[key]

        def __contains__(self, key):
            return key in self._local_mapping or key in self._global_mapping

        def get(self, key, default=None):
            return self[key] if key in self else default

        @classmethod
        def register(cls, key, value):
            cls._global_mapping[key] = value

    Interface.__name__ = name
    return Interface


class ByteTokenizer:
    """Each UTF-8 byte a token, after a BOS token (256)."""

    def __call__(self, text, return_tensors=None):
        ids = [256] + list(text.encode("utf-8"))
        assert return_tensors == "pt"
        return {"input_ids": torch.tensor([ids]), "attention_mask": torch.ones(1, len(ids), dtype=torch.int64)}


MODELS = ("standin/tiny", "standin/tiny-interleaved", "standin/tiny-local-rope", "standin/tiny-softcap",
          "standin/tiny-typed-rope", "standin/tiny-vision", "standin/tiny-lm-base")


def install(version="4.57.0", with_mask_interface=True, with_attention_interface=True):
    """Puts a fresh fake transformers into sys.modules and returns it. fake.created lists every
    model from_pretrained made; fake.loads every from_pretrained call's keyword arguments."""
    fake = types.ModuleType("transformers")
    fake.__version__ = version
    fake.__path__ = []  # a package, so its submodules import
    fake.created, fake.loads = [], []
    v = tuple(int(p) for p in version.split(".")[:2])

    modeling_utils = types.ModuleType("transformers.modeling_utils")
    attention_interface = make_interface("AttentionInterface", {"sdpa": sdpa_attention})
    modeling_utils.ALL_ATTENTION_FUNCTIONS = attention_interface()
    masking_utils = types.ModuleType("transformers.masking_utils")
    mask_interface = make_interface("AttentionMaskInterface", {"sdpa": sdpa_mask, "eager": eager_mask})
    masking_utils.ALL_MASK_ATTENTION_FUNCTIONS = mask_interface()
    fake.modeling_utils, fake.masking_utils = modeling_utils, masking_utils
    if with_attention_interface:
        fake.AttentionInterface = attention_interface
    if with_mask_interface:
        fake.AttentionMaskInterface = mask_interface

    def config_for(name):
        if name not in MODELS:
            raise OSError(f"{name} is not a model here")
        return StandInConfig(v, interleaved=name.endswith("interleaved"), local_rope=name.endswith("local-rope"),
                             softcap=name.endswith("softcap"), typed_rope=name.endswith("typed-rope"))

    class AutoConfig:
        @staticmethod
        def from_pretrained(name):
            return config_for(name)

    class AutoTokenizer:
        @staticmethod
        def from_pretrained(name):
            config_for(name)
            return ByteTokenizer()

    class AutoModelForCausalLM:
        @staticmethod
        def from_pretrained(name, attn_implementation=None, **kwargs):
            fake.loads.append(dict(kwargs, attn_implementation=attn_implementation))
            dtype = kwargs.get("dtype", kwargs.get("torch_dtype", "auto"))
            config = config_for(name)
            impl = attn_implementation or "sdpa"
            if impl != "eager" and impl not in modeling_utils.ALL_ATTENTION_FUNCTIONS:
                raise ValueError(f"{impl} is not a registered attention implementation")
            config._attn_implementation = impl
            torch.manual_seed(1234)  # the same "checkpoint" every time
            model = StandInForCausalLM(config, vision=name.endswith("vision"))
            if name.endswith("lm-base"):
                model.base_model_prefix = "language_model"  # absent: base_model is the model itself
            with torch.no_grad():
                for p in model.parameters():
                    if p.dim() == 2:
                        p.normal_(0.0, 0.3)
            model.to(torch.bfloat16 if dtype == "auto" else dtype)  # the checkpoint is bfloat16
            fake.created.append(model)
            return model

    fake.AutoConfig, fake.AutoTokenizer, fake.AutoModelForCausalLM = AutoConfig, AutoTokenizer, AutoModelForCausalLM
    sys.modules["transformers"] = fake
    sys.modules["transformers.modeling_utils"] = modeling_utils
    sys.modules["transformers.masking_utils"] = masking_utils
    return fake


def uninstall():
    for name in ("transformers", "transformers.modeling_utils", "transformers.masking_utils"):
        sys.modules.pop(name, None)
