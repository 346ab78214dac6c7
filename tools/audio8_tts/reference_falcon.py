"""The Audio8 TTS 0.1B slow AR as its HF wrapper runs it: ``transformers.FalconH1Model`` + compact head.

Runs inside ``.ref-envs/audio8`` (transformers 4.57.x, tools/reference_envs/audio8.sh), never in
the project venv:

    .ref-envs/audio8/bin/python tools/audio8_tts/reference_falcon.py CASES.json OUT_DIR

The 0.1B ``modeling_arktts.py`` is HF remote code only; :class:`FalconSlowReference` rebuilds its
slow side from ``docs/families/audio8_tts-0.1b.md`` and the ports that replicate it
(upstream's SGLang ``sglang_model_hybrid.py``, mlx-audio, vLLM-Omni):

* ``slow = FalconH1Model(_build_falcon_config(config))`` with every Falcon field passed through;
* the embedding is upstream's ``_embed`` with ``slow.embed_tokens`` as the text table (text
  embedding plus the codebook-offset sum, zeroed outside the semantic range), multiplied by
  ``embedding_multiplier`` as a whole and passed as ``inputs_embeds``;
* ``last_hidden_state`` (after ``final_layernorm``) feeds ``semantic_output`` (4097 compact
  logits) and the fast AR;
* prefill passes ``attention_mask``, ``position_ids``, ``cache_position`` and a fresh
  ``FalconHybridMambaAttentionDynamicCache``; each later token one column with the cache
  (recurrent Mamba2 update, cached attention).

``CASES.json``: ``{"checkpoints": {name: dir}, "cases": [...]}``; each checkpoint dir holds
``config.json`` (arktts keys) and ``model.safetensors`` (``slow.*``, ``semantic_output.weight``,
``codebook_embeddings.weight``), loaded strictly. Case kinds:

* ``slow``: ``ids`` [11, T] (batch 1) and ``prefill`` P: the full-sequence forward (no cache)
  gives ``full_logits``/``full_hidden`` for every position; prefill of the first P positions
  then token-by-token decode of the rest gives ``step_logits``/``step_hidden``.
* ``mixer``: layer 0's ``FalconH1Mixer.torch_forward`` alone on ``x`` [1, T, dim]: ``full``
  (no cache), then prefill P + one-token steps (``steps``).
* ``batch``: a left-padded prompt ``ids`` [B, 11, T] with ``mask`` [B, T], then ``columns``
  [steps][B, 11] with their ``valid`` bits, as upstream's ``generate`` feeds them: the logits
  and hidden states of the last position after the prefill and after each step.

Each case writes ``OUT_DIR/<name>.npz``; the last stdout line is a JSON summary (tensor counts
loaded per checkpoint, the attention implementation in use).
"""

from __future__ import annotations

import json
import sys
import time
import warnings
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import torch
from torch import nn

warnings.filterwarnings("ignore")

# Defaults of the arktts config fields the 0.1B wrapper passes to FalconH1Config (mlx-audio's
# ModelConfig, which mirrors the reference config's names).
FALCON_DEFAULTS: dict[str, Any] = {
    "hidden_act": "silu", "attention_bias": False, "attention_dropout": 0.0, "attention_in_multiplier": 1.0,
    "attention_out_multiplier": 1.0, "key_multiplier": 1.0, "embedding_multiplier": 1.0,
    "lm_head_multiplier": 1.0, "expansion_factor": 2.0, "mlp_bias": False, "mlp_multipliers": [1.0, 1.0],
    "projectors_bias": False, "ssm_in_multiplier": 1.0, "ssm_multipliers": [1.0] * 5,
    "ssm_out_multiplier": 1.0, "mamba_chunk_size": 128, "mamba_conv_bias": True, "mamba_d_conv": 4,
    "mamba_d_head": 32, "mamba_d_ssm": 768, "mamba_d_state": 64, "mamba_expand": 2, "mamba_n_groups": 1,
    "mamba_n_heads": 24, "mamba_norm_before_gate": False, "mamba_proj_bias": False, "mamba_rms_norm": False,
    "mamba_use_mlp": True, "initializer_range": 0.02, "tie_word_embeddings": False, "max_seq_len": 2048,
    "norm_eps": 1e-5,
}


def build_falcon_config(cfg: dict[str, Any]):
    """``ArkttsModel._build_falcon_config`` of the 0.1B remote code (as SGLang's adapter mirrors it)."""
    from transformers import FalconH1Config

    c = SimpleNamespace(**{**FALCON_DEFAULTS, **cfg})
    return FalconH1Config(
        vocab_size=c.vocab_size, hidden_size=c.dim, intermediate_size=c.intermediate_size,
        num_hidden_layers=c.n_layer, num_attention_heads=c.n_head, num_key_value_heads=c.n_local_heads,
        head_dim=c.head_dim, hidden_act=c.hidden_act, rms_norm_eps=c.norm_eps, rope_theta=c.rope_base,
        max_position_embeddings=c.max_seq_len, attention_bias=c.attention_bias,
        attention_dropout=c.attention_dropout, attention_in_multiplier=c.attention_in_multiplier,
        attention_out_multiplier=c.attention_out_multiplier, key_multiplier=c.key_multiplier,
        embedding_multiplier=c.embedding_multiplier, lm_head_multiplier=c.lm_head_multiplier,
        expansion_factor=c.expansion_factor, mlp_bias=c.mlp_bias, mlp_multipliers=list(c.mlp_multipliers),
        mamba_chunk_size=c.mamba_chunk_size, mamba_conv_bias=c.mamba_conv_bias, mamba_d_conv=c.mamba_d_conv,
        mamba_d_head=c.mamba_d_head, mamba_d_ssm=c.mamba_d_ssm, mamba_d_state=c.mamba_d_state,
        mamba_expand=c.mamba_expand, mamba_n_groups=c.mamba_n_groups, mamba_n_heads=c.mamba_n_heads,
        mamba_norm_before_gate=c.mamba_norm_before_gate, mamba_proj_bias=c.mamba_proj_bias,
        mamba_rms_norm=c.mamba_rms_norm, mamba_use_mlp=c.mamba_use_mlp, projectors_bias=c.projectors_bias,
        ssm_in_multiplier=c.ssm_in_multiplier, ssm_multipliers=list(c.ssm_multipliers),
        ssm_out_multiplier=c.ssm_out_multiplier, initializer_range=c.initializer_range, use_cache=True,
        tie_word_embeddings=c.tie_word_embeddings, pad_token_id=c.pad_token_id, eos_token_id=c.eos_token_id,
    )


class FalconSlowReference(nn.Module):
    """The 0.1B wrapper's slow side: embedding sum, ``FalconH1Model``, compact head."""

    def __init__(self, cfg: dict[str, Any]) -> None:
        super().__init__()
        from transformers import FalconH1Model

        self.cfg = {**FALCON_DEFAULTS, **cfg}
        self.falcon_config = build_falcon_config(cfg)
        self.slow = FalconH1Model(self.falcon_config)
        self.codebook_embeddings = nn.Embedding(cfg["codebook_size"] * cfg["num_codebooks"], cfg["dim"])
        self.semantic_output = nn.Linear(cfg["dim"], cfg["codebook_size"] + 1, bias=False)

    def embed(self, input_ids: torch.Tensor) -> torch.Tensor:
        """Upstream ``_embed`` with the Falcon text table; unscaled."""
        cfg = self.cfg
        parts = [self.codebook_embeddings(input_ids[:, i + 1] + i * cfg["codebook_size"])
                 for i in range(cfg["num_codebooks"])]
        codebook_sum = torch.stack(parts, dim=1).sum(dim=1)
        semantic = (input_ids[:, 0] >= cfg["semantic_begin_id"]) & (input_ids[:, 0] <= cfg["semantic_end_id"])
        codebook_sum = torch.where(semantic.unsqueeze(-1), codebook_sum, 0.0)
        return self.slow.embed_tokens(input_ids[:, 0]) + codebook_sum

    def new_cache(self, batch_size: int = 1):
        from transformers.models.falcon_h1.modeling_falcon_h1 import FalconHybridMambaAttentionDynamicCache

        w = self.slow.embed_tokens.weight
        return FalconHybridMambaAttentionDynamicCache(
            self.falcon_config, batch_size, w.dtype,
            devices=[layer.mamba.conv1d.weight.device for layer in self.slow.layers])

    def slow_forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, position_ids: torch.Tensor,
                     cache=None, cache_position: torch.Tensor | None = None
                     ) -> tuple[torch.Tensor, torch.Tensor]:
        """(compact logits, last_hidden_state) for every position of ``input_ids`` [B, 11, T]."""
        embeds = self.embed(input_ids) * self.slow.embedding_multiplier
        out = self.slow(inputs_embeds=embeds, attention_mask=attention_mask, position_ids=position_ids,
                        past_key_values=cache, use_cache=cache is not None, cache_position=cache_position)
        hidden = out.last_hidden_state
        return self.semantic_output(hidden), hidden


def load_reference(ckpt: Path) -> tuple[FalconSlowReference, int]:
    from safetensors.torch import load_file

    cfg = json.loads((ckpt / "config.json").read_text(encoding="utf-8"))
    model = FalconSlowReference(cfg).eval()
    state = load_file(str(ckpt / "model.safetensors"))
    wanted = {k: v for k, v in state.items()
              if k.startswith(("slow.", "semantic_output.", "codebook_embeddings."))}
    model.load_state_dict(wanted, strict=True)
    return model, len(wanted)


def run_slow(model: FalconSlowReference, case: dict) -> dict[str, np.ndarray]:
    ids = torch.tensor(case["ids"], dtype=torch.long)[None]
    total, prefill = ids.shape[-1], int(case["prefill"])
    with torch.inference_mode():
        mask = torch.ones(1, total, dtype=torch.long)
        full_logits, full_hidden = model.slow_forward(ids, mask, torch.arange(total)[None])
        cache = model.new_cache()
        positions = torch.arange(prefill)
        logits, hidden = model.slow_forward(ids[..., :prefill], mask[:, :prefill], positions[None], cache,
                                            positions)
        step_logits, step_hidden = [logits[0]], [hidden[0]]
        for pos in range(prefill, total):
            p = torch.tensor([pos])
            logits, hidden = model.slow_forward(ids[..., pos : pos + 1], mask[:, : pos + 1], p[None], cache,
                                                p)
            step_logits.append(logits[0])
            step_hidden.append(hidden[0])
    return {
        "full_logits": full_logits[0].numpy(), "full_hidden": full_hidden[0].numpy(),
        "step_logits": torch.cat(step_logits).numpy(), "step_hidden": torch.cat(step_hidden).numpy(),
    }


def run_mixer(model: FalconSlowReference, case: dict) -> dict[str, np.ndarray]:
    mixer = model.slow.layers[0].mamba
    x = torch.tensor(np.asarray(case["x"], dtype=np.float32))
    total, prefill = x.shape[1], int(case["prefill"])
    with torch.inference_mode():
        full = mixer.torch_forward(x)
        cache = model.new_cache()
        outs = [mixer.torch_forward(x[:, :prefill], cache, torch.arange(prefill))]
        cache.has_previous_state = True
        for pos in range(prefill, total):
            # With mamba_rms_norm the gated norm squeezes a one-token output to (B, dim).
            outs.append(mixer.torch_forward(x[:, pos : pos + 1], cache, torch.tensor([pos]))
                        .reshape(1, 1, -1))
    return {"full": full[0].numpy(), "steps": torch.cat(outs, dim=1)[0].numpy(),
            "ssm_state": cache.ssm_states[0][0].numpy(), "conv_state": cache.conv_states[0][0].numpy()}


def run_batch(model: FalconSlowReference, case: dict) -> dict[str, np.ndarray]:
    """A left-padded batch as upstream's ``generate`` drives the slow AR: prefill with the
    padding mask and ``cumsum(mask) - 1`` positions, then one column per step with its
    ``active_before`` bit appended to the mask and position ``prompt_length + step``."""
    ids = torch.tensor(case["ids"], dtype=torch.long)
    mask = torch.tensor(case["mask"], dtype=torch.long)
    width = ids.shape[-1]
    with torch.inference_mode():
        cache = model.new_cache(ids.shape[0])
        positions = mask.cumsum(-1).sub(1).clamp_min(0)
        logits, hidden = model.slow_forward(ids, mask, positions, cache, torch.arange(width))
        out_logits, out_hidden = [logits[:, -1]], [hidden[:, -1]]
        lengths = mask.sum(-1)
        for step, (column, valid) in enumerate(zip(case["columns"], case["valid"])):
            mask = torch.cat((mask, torch.tensor(valid, dtype=torch.long)[:, None]), dim=1)
            logits, hidden = model.slow_forward(torch.tensor(column, dtype=torch.long)[..., None], mask,
                                                (lengths + step)[:, None], cache,
                                                torch.tensor([width + step]))
            out_logits.append(logits[:, -1])
            out_hidden.append(hidden[:, -1])
    return {"logits": torch.stack(out_logits, 1).numpy(), "hidden": torch.stack(out_hidden, 1).numpy()}


def import_upstream(path: str | Path):
    """Upstream's ``modeling_arktts`` (Audio8-AI/Audio8_TTS@14468db, ``model/audio8_tts_0_6B_preview``
    of a checkout at ``path``), imported as the package HF remote code would be."""
    import importlib
    import importlib.util

    folder = Path(path)
    if (folder / "model" / "audio8_tts_0_6B_preview").is_dir():
        folder = folder / "model" / "audio8_tts_0_6B_preview"
    name = "arktts_upstream"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, folder / "__init__.py",
                                                      submodule_search_locations=[str(folder)])
        package = importlib.util.module_from_spec(spec)
        sys.modules[name] = package
    return importlib.import_module(f"{name}.modeling_arktts")


def arktts_01b_class(upstream):
    """The 0.1B ``ArkttsModel`` as section 5 reconstructs its remote code, on upstream's classes.

    Everything but the slow side is upstream's own code: the fast AR, sampling (legacy top-k/top-p,
    temperature, exponential race, RAS), the ``generate`` loop with its RNG order, the codec. The
    slow side is ``FalconH1Model`` + ``semantic_output``; the compact head's index space is mapped
    at the seams the loop goes through:

    * ``_sample_semantic`` filters (semantic 0..4095 plus EOS 4096: a no-op on 4097 scores), samples
      and applies RAS in compact indices, the window read back in compact indices (its zeros are
      code 0, the quirk of the zero-initialised window); it returns the token the loop feeds back
      and tests for EOS: ``semantic_begin_id + i``, or ``eos_token_id`` for index 4096;
    * ``_generate_codebooks`` takes the compact index as ``c0`` (clamped to 0..4095);
    * ``_slow_step`` embeds (upstream ``_embed`` on ``slow.embed_tokens``), scales the whole sum by
      ``embedding_multiplier``, runs ``FalconH1Model`` with the hybrid cache, and returns the compact
      logits of the last position and ``last_hidden_state`` for the fast AR.
    """
    ArkttsModel, ArkttsKVCache = upstream.ArkttsModel, upstream.ArkttsKVCache

    class Arktts01BModel(ArkttsModel):
        def __init__(self, config) -> None:
            upstream.PreTrainedModel.__init__(self, config)
            from transformers import FalconH1Model

            raw = config.to_dict()
            self.falcon_config = build_falcon_config(raw)
            self.slow = FalconH1Model(self.falcon_config)
            self.codebook_embeddings = nn.Embedding(config.codebook_size * config.num_codebooks, config.dim)
            self.semantic_output = nn.Linear(config.dim, config.codebook_size + 1, bias=False)
            self.fast_project_in = (nn.Linear(config.dim, config.fast_dim) if config.fast_dim != config.dim
                                    else nn.Identity())
            self.fast_embeddings = nn.Embedding(config.codebook_size, config.fast_dim)
            self.fast_layers = nn.ModuleList([
                upstream.ArkttsTransformerBlock(
                    config.fast_dim, config.fast_intermediate_size, config.fast_n_head,
                    config.fast_n_local_heads, config.fast_head_dim, config.fast_attention_qkv_bias,
                    config.fast_attention_o_bias,
                    config.fast_attention_qk_norm, config.norm_eps, config.dropout, False)
                for _ in range(config.n_fast_layer)])
            self.fast_norm = upstream.ArkttsRMSNorm(config.fast_dim, config.norm_eps)
            self.fast_output = nn.Linear(config.fast_dim, config.codebook_size, bias=False)
            self.register_buffer("fast_freqs_cis", upstream._precompute_rope(
                config.num_codebooks, config.fast_head_dim, config.rope_base), persistent=False)
            self.__dict__["_arktts_codec"] = None
            self.gradient_checkpointing = False
            self._slow_cache = None
            self.post_init()

        def _embed(self, input_ids):
            cfg = self.config
            parts = [self.codebook_embeddings(input_ids[:, i + 1] + i * cfg.codebook_size)
                     for i in range(cfg.num_codebooks)]
            codebook_sum = torch.stack(parts, dim=1).sum(dim=1)
            semantic = (input_ids[:, 0] >= cfg.semantic_begin_id) & (input_ids[:, 0] <= cfg.semantic_end_id)
            codebook_sum = torch.where(semantic.unsqueeze(-1), codebook_sum, 0.0)
            return self.slow.embed_tokens(input_ids[:, 0]) + codebook_sum

        def _setup_generation_caches(self, batch_size, max_length, dtype):
            from transformers.models.falcon_h1.modeling_falcon_h1 import (
                FalconHybridMambaAttentionDynamicCache,
            )

            self._slow_cache = FalconHybridMambaAttentionDynamicCache(
                self.falcon_config, batch_size, dtype,
                devices=[layer.mamba.conv1d.weight.device for layer in self.slow.layers])
            for layer in self.fast_layers:
                layer.attention.kv_cache = ArkttsKVCache(
                    batch_size, self.config.num_codebooks, self.config.fast_n_local_heads,
                    self.config.fast_head_dim, dtype, return_full=True).to(self.device)

        def _slow_step(self, input_ids, cache_position, position_ids, attention_mask):
            embeds = self._embed(input_ids) * self.slow.embedding_multiplier
            out = self.slow(inputs_embeds=embeds, attention_mask=attention_mask, position_ids=position_ids,
                            past_key_values=self._slow_cache, use_cache=True, cache_position=cache_position)
            normalized = out.last_hidden_state[:, -1:]
            return self.semantic_output(normalized)[:, -1], normalized

        # -- the compact index space -------------------------------------------------------
        def _compact(self, token):
            cfg = self.config
            return torch.where(token == cfg.eos_token_id, torch.full_like(token, cfg.codebook_size),
                               torch.where(token >= cfg.semantic_begin_id, token - cfg.semantic_begin_id,
                                           token))

        def _token(self, index):
            cfg = self.config
            return torch.where(index == cfg.codebook_size, torch.full_like(index, cfg.eos_token_id),
                               index + cfg.semantic_begin_id)

        def _sample_semantic(self, history, logits, custom_processors, top_k, top_p, temperature, previous,
                             do_sample, generator=None):
            cfg = self.config
            processors = upstream.LogitsProcessorList([
                upstream.ArkttsSemanticLogitsProcessor(0, cfg.codebook_size - 1, cfg.codebook_size),
                *custom_processors])
            regular = self._processed_scores(history, logits, processors, top_k, top_p, temperature)
            if not do_sample:
                return self._token(regular.argmax(dim=-1))
            normal = self._sample(regular, generator=generator)
            high_scores = self._processed_scores(history, logits, processors, top_k, cfg.ras_top_p,
                                                 cfg.ras_temperature)
            high = self._sample(high_scores, generator=generator)
            if previous is None:
                return self._token(normal)
            repeated = (self._compact(previous) == normal[:, None]).any(dim=1)
            return self._token(torch.where(repeated & (normal < cfg.codebook_size), high, normal))

        def _generate_codebooks(self, slow_hidden, semantic, processors, top_k, top_p, temperature, do_sample,
                                generator=None):
            cfg = self.config
            # Upstream's body with c0 = the compact index (clamped), not semantic - semantic_begin_id.
            hidden = self.fast_project_in(slow_hidden)
            self._fast_step(hidden, 0)
            current = self._compact(semantic).clamp(0, cfg.codebook_size - 1)
            codebooks = [current]
            fast_history = current[:, None]
            hidden = self.fast_embeddings(current)[:, None]
            for position in range(1, cfg.num_codebooks):
                scores = self._fast_step(hidden, position)
                scores = self._processed_scores(fast_history, scores, processors, top_k, top_p, temperature)
                current = self._sample(scores, generator=generator) if do_sample else scores.argmax(dim=-1)
                codebooks.append(current)
                fast_history = torch.cat((fast_history, current[:, None]), dim=1)
                hidden = self.fast_embeddings(current)[:, None]
            return torch.stack(codebooks, dim=1)

    return Arktts01BModel


def load_01b(upstream, ckpt: Path):
    """The 0.1B reference model of a checkpoint folder, loaded strictly (plus its config class)."""
    from safetensors.torch import load_file

    config_module = sys.modules[upstream.__name__.rsplit(".", 1)[0] + ".configuration_arktts"]
    raw = json.loads((ckpt / "config.json").read_text(encoding="utf-8"))
    config = config_module.ArkttsConfig(**raw)
    config._name_or_path = str(ckpt)
    model = arktts_01b_class(upstream)(config).eval()
    model.load_state_dict(load_file(str(ckpt / "model.safetensors")), strict=True)
    return model


def run_generate(model, case: dict) -> dict[str, np.ndarray]:
    """Upstream ``generate`` on direct prompt rows ``ids`` [B, 11, T] (+ ``mask``), greedy or
    seeded (``torch.Generator().manual_seed(seed)``); ``timed`` adds wall seconds and the time to
    the first frame (benchmarks)."""
    ids = torch.tensor(case["ids"], dtype=torch.long)
    mask = torch.tensor(case.get("mask") or np.ones(ids.shape[::2]).tolist(), dtype=torch.long)
    generator = None if case.get("seed") is None else torch.Generator().manual_seed(int(case["seed"]))
    stamps: list[float] = []
    if case.get("timed"):  # the time of each frame: when its codebooks are done
        codebooks = model._generate_codebooks

        def timed(*args, **kwargs):
            out = codebooks(*args, **kwargs)
            stamps.append(time.perf_counter())
            return out

        model._generate_codebooks = timed
        stamps.append(time.perf_counter())
    out = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=int(case["max_new_tokens"]),
                         temperature=float(case.get("temperature", 0.7)), top_p=float(case.get("top_p", 0.9)),
                         top_k=int(case.get("top_k", 50)), do_sample=bool(case.get("do_sample", True)),
                         generator=generator, return_dict_in_generate=True)
    result = {"codes": out.codes.numpy(), "code_lengths": out.code_lengths.numpy(),
              "finished": out.finished.numpy()}
    if stamps:
        result.update(seconds=np.array(time.perf_counter() - stamps[0]),
                      first_frame=np.array(stamps[1] - stamps[0]))
        del model._generate_codebooks
    if case.get("decode"):
        wav, lengths = model.decode_audio(out.codes)
        result.update(wav=wav.numpy(), wav_lengths=lengths.numpy())
    return result


KINDS = {"slow": run_slow, "mixer": run_mixer, "batch": run_batch}

# -- the tiny 0.1B checkpoint and its goldens ---------------------------------------------------
#: The Falcon-H1 keys of a tiny 0.1B config (real: dim 512, 24 layers, 8/2 heads, d_ssm 768 in 24
#: heads of 32, d_state 64, chunk 128); the chunk is small so that prompts span several chunks.
TINY_FALCON: dict[str, Any] = {
    "slow_backbone": "falcon_h1", "tie_word_embeddings": False, "rope_base": 1e11, "norm_eps": 1e-5,
    "embedding_multiplier": 0.10888671875, "lm_head_multiplier": 0.078125, "expansion_factor": 1.5,
    "mamba_d_ssm": 64, "mamba_n_heads": 8, "mamba_d_head": 8, "mamba_d_state": 16, "mamba_n_groups": 1,
    "mamba_d_conv": 4, "mamba_chunk_size": 16, "mamba_conv_bias": True, "mamba_rms_norm": False,
    "mamba_norm_before_gate": False, "mamba_use_mlp": True,
}
def falcon_cases(reference: Any) -> list[dict[str, Any]]:
    """The 0.1B cases: tts greedy and sampled, cloning (the processor's path), two references, long
    text, a left-padded batch (texts, references and audio files of ``reference.py``)."""
    t1, t3 = reference.T1, reference.T3
    return [
        {"name": "tts_greedy", "kind": "generate", "text": t1, "do_sample": False, "max_new_tokens": 20},
        {"name": "tts_sampled", "kind": "generate", "text": t1, "seed": 1234, "max_new_tokens": 32},
        {"name": "tts_sampled_hot", "kind": "generate", "text": t3, "seed": 7, "max_new_tokens": 40,
         "temperature": 1.3, "top_k": 20, "top_p": 0.95},
        {"name": "clone_sampled", "kind": "generate", "text": reference.T2, "references": [reference.REF1],
         "seed": 42, "max_new_tokens": 24},
        {"name": "clone_greedy", "kind": "generate", "text": t3, "references": [reference.REF1],
         "do_sample": False, "max_new_tokens": 16},
        {"name": "multi_reference", "kind": "generate", "text": t1,
         "references": [reference.REF1, reference.REF2], "seed": 11, "max_new_tokens": 16},
        {"name": "long_form", "kind": "long_form", "text": reference.LONG, "chunks": reference.LONG_CHUNKS,
         "text_chunk_size": 60, "seed": 5, "max_new_tokens": 10},
        {"name": "batch_sampled", "kind": "batch", "texts": [t1, t3], "seed": 3, "max_new_tokens": 16},
    ]


def randomize_01b(model: nn.Module, checkpoint: Any, seed: int) -> None:
    """checkpoint.py's weights, then the Mamba2 parameters in their usual ranges (A = -(1..16),
    dt = softplus(dt_bias) in about 0.02..0.3, D near 1) and the embeddings scaled as upstream's."""
    checkpoint.randomize(model, seed, scale={"slow": 1.0, "fast_output": 3.0})
    gen = torch.Generator().manual_seed(seed + 17)
    with torch.no_grad():
        for layer in model.slow.layers:
            m = layer.mamba
            m.A_log.copy_(torch.log(torch.rand(m.A_log.shape, generator=gen) * 15 + 1))
            m.dt_bias.copy_(torch.rand(m.dt_bias.shape, generator=gen) * 3 - 4)
            m.D.copy_(1 + 0.1 * torch.randn(m.D.shape, generator=gen))
        model.codebook_embeddings.weight.mul_(0.3)


def write_01b_checkpoint(folder: Path, up: Any, checkpoint: Any,
                         seed: int = 1) -> tuple[Path, dict[str, Any]]:
    """A tiny 0.1B HF-layout folder: the 0.6B tiny's tokenizer, codec (the same bytes: seed 0) and
    fast AR sizes, a Falcon-H1 slow AR and the compact head (bf16 ``model.safetensors``, as the HF
    snapshot). The EOS row of the head is scaled down so that runs are not all a few frames long."""
    from safetensors.torch import save_file

    folder = Path(folder)
    cfg = {k: v for k, v in checkpoint.TINY.items() if not k.startswith("attention_")}
    cfg.update(TINY_FALCON)
    checkpoint.write_checkpoint(folder, up, checkpoint.TINY, seed=0)  # codec, tokenizer and sidecars
    (folder / "config.json").write_text(json.dumps(cfg, indent=2), encoding="utf-8")
    config = up.configuration.ArkttsConfig(**cfg)
    model = arktts_01b_class(up.model)(config)
    randomize_01b(model, checkpoint, seed)
    with torch.no_grad():
        model.semantic_output.weight[-1].mul_(0.2)
    state = {k: v.detach().to(torch.bfloat16).contiguous() for k, v in model.state_dict().items()}
    save_file(state, str(folder / "model.safetensors"), metadata={"format": "pt"})
    return folder, cfg


def write_goldens(upstream: Path, out: Path) -> None:
    """``tests/data/audio8_tts/falcon``: the tiny 0.1B folder, its reference audio, goldens of
    :func:`falcon_cases` from the reconstructed 0.1B model (run by reference.py's upstream runner),
    and ``manifest.json``."""
    import shutil

    import transformers

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import checkpoint
    import reference

    torch.set_num_threads(1)
    up = checkpoint.upstream_modules(upstream)
    checkpoint.patch_codec_class(up)
    import soundfile as sf

    for sub in ("tiny", "goldens"):
        shutil.rmtree(out / sub, ignore_errors=True)
        (out / sub).mkdir(parents=True)
    folder, cfg = write_01b_checkpoint(out / "tiny", up, checkpoint, seed=1)
    audio_dir = out.parent / "audio"  # the 0.6B goldens' reference audio, shared
    audio_dir.mkdir(exist_ok=True)
    for name, (seed, seconds, rate) in reference.AUDIO.items():
        if not (audio_dir / name).is_file():
            sf.write(audio_dir / name, reference.voice_like(seed, seconds, rate), rate, subtype="FLOAT")
    runner = reference.Runner.__new__(reference.Runner)
    runner.torch, runner.up, runner.audio_dir = torch, up, audio_dir
    runner.model = load_01b(up.model, folder)
    runner.model.load_codec(device="cpu")
    runner.processor = up.processing.ArkttsProcessor.from_pretrained(str(folder))
    runner.cfg = runner.model.config
    shapes = {}
    cases = falcon_cases(reference)
    for case in cases:
        result = getattr(runner, case["kind"])(case)
        np.savez_compressed(out / "goldens" / f"{case['name']}.npz", **result)
        shapes[case["name"]] = {k: list(np.shape(v)) for k, v in result.items()}
        print(case["name"], shapes[case["name"]], file=sys.stderr)
    files = {f"model/audio8_tts_0_6B_preview/{f}": reference.sha256(up.root / f)
             for f in checkpoint.UPSTREAM_FILES}
    manifest = {
        "upstream": {"repository": "Audio8-AI/Audio8_TTS", "commit": reference.COMMIT, "files": files},
        "oracle": "upstream ArkttsModel (fast AR, sampling, generate, codec, processor) with the 0.1B "
                  "slow side reconstructed on transformers.FalconH1Model "
                  "(tools/audio8_tts/reference_falcon.py)",
        "generated_by": "tools/audio8_tts/reference_falcon.py goldens",
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__},
        "defaults": reference.DEFAULTS, "cases": cases, "shapes": shapes,
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n",
                                       encoding="utf-8")


def main(argv: list[str]) -> int:
    if argv and argv[0] == "goldens":
        repo = Path(__file__).resolve().parents[2]
        upstream = Path(argv[1]) if len(argv) > 1 else Path("/work/upstream/audio8")
        write_goldens(upstream,
                      Path(argv[2]) if len(argv) > 2 else repo / "tests" / "data" / "audio8_tts" / "falcon")
        return 0
    spec = json.loads(Path(argv[0]).read_text(encoding="utf-8"))
    out_dir = Path(argv[1])
    out_dir.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(int(spec.get("threads", 1)))
    models: dict[str, FalconSlowReference] = {}
    summary: dict[str, Any] = {"loaded": {}, "torch": torch.__version__}
    upstream = import_upstream(spec["upstream"]) if spec.get("upstream") else None
    for name, ckpt in spec["checkpoints"].items():
        models[name], summary["loaded"][name] = load_reference(Path(ckpt))
        summary["attn_implementation"] = models[name].slow.config._attn_implementation
    pipelines = {name: load_01b(upstream, Path(ckpt)) for name, ckpt in spec.get("pipelines", {}).items()}
    import transformers

    summary["transformers"] = transformers.__version__
    for case in spec["cases"]:
        if case["kind"] == "generate":
            result = run_generate(pipelines[case["checkpoint"]], case)
        else:
            result = KINDS[case["kind"]](models[case["checkpoint"]], case)
        np.savez(out_dir / f"{case['name']}.npz", **result)
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
