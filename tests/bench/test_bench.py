"""``autoglm bench``: checkpoints of real shapes, reproducible workloads, and a throughput run end to end."""
from __future__ import annotations

import json

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationMixin

from autoglm.bench.cli import main
from autoglm.bench.lib.baseline import PAD_TOKEN_ID, left_padded_batch
from autoglm.bench.lib.workloads import BenchRequest, build_workload, usable_token_ids
from autoglm.bench.make_model.checkpoint import shape_config
from autoglm.cli.main import main as autoglm_main
from autoglm.llm import LLM
from autoglm.models import ModelConfig

# A narrow qwen2.5-0.5b that keeps the real vocabulary: big enough to be honest, small enough to be quick.
NARROW_OVERRIDES = ["hidden_size=64", "intermediate_size=128", "num_attention_heads=4", "num_key_value_heads=2"]
QUICK_LENGTH_SCALE = "0.0625"  # mixed prompts of 2-32 tokens, outputs of 2-16; fixed 8 and 4
SIDE_KEYS = {"num_requests", "prompt_tokens", "output_tokens", "elapsed_s", "output_tokens_per_s",
             "total_tokens_per_s"}


def make_narrow_model(out, seed: int = 0) -> None:
    overrides = [arg for value in NARROW_OVERRIDES for arg in ("--override", value)]
    main(["make-model", "--shape", "qwen2.5-0.5b", "--layers", "1", *overrides, "--seed", str(seed), "--out", str(out)])


@pytest.fixture(scope="module")
def narrow_model(tmp_path_factory):
    folder = tmp_path_factory.mktemp("qwen-narrow")
    make_narrow_model(folder)
    return folder


# ---- shapes: the engine reads the published architecture from each config ----------
def engine_view(shape: str) -> ModelConfig:
    return ModelConfig.from_dict(shape_config(shape).to_dict())


def test_qwen_shape():
    config = engine_view("qwen2.5-0.5b")
    assert config.architecture == "Qwen2ForCausalLM"
    assert (config.hidden_size, config.num_hidden_layers, config.num_attention_heads, config.num_key_value_heads,
            config.intermediate_size, config.vocab_size) == (896, 24, 14, 2, 4864, 151936)
    assert config.tie_word_embeddings and config.rope.theta == 1_000_000


def test_llama_shape():
    config = engine_view("llama-3.2-1b")
    assert config.architecture == "LlamaForCausalLM"
    assert (config.hidden_size, config.num_hidden_layers, config.num_attention_heads, config.num_key_value_heads,
            config.intermediate_size, config.vocab_size) == (2048, 16, 32, 8, 8192, 128256)
    assert config.tie_word_embeddings and not config.attention_bias
    assert (config.rope.rope_type, config.rope.factor, config.rope.theta) == ("llama3", 32.0, 500_000)


def test_glm4_shape():
    config = engine_view("glm-4-9b")
    assert config.architecture == "Glm4ForCausalLM"
    assert (config.hidden_size, config.num_hidden_layers, config.num_attention_heads, config.num_key_value_heads,
            config.head_dim, config.intermediate_size, config.vocab_size) == (4096, 40, 32, 2, 128, 13696, 151552)
    assert config.attention_bias and not config.tie_word_embeddings
    assert config.rope.partial_rotary_factor == 0.5


# ---- make-model -------------------------------------------------------------------
def test_make_model_writes_a_checkpoint_transformers_loads(narrow_model):
    config = json.loads((narrow_model / "config.json").read_text())
    assert config["architectures"] == ["Qwen2ForCausalLM"]
    assert (config["num_hidden_layers"], config["hidden_size"], config["vocab_size"]) == (1, 64, 151936)
    assert config["tie_word_embeddings"] is True
    model = AutoModelForCausalLM.from_pretrained(narrow_model)
    assert model.dtype == torch.bfloat16
    assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()
    assert model.model.embed_tokens.weight.float().std() > 0.01  # filled, not left empty or zero
    tokenizer = AutoTokenizer.from_pretrained(narrow_model)
    assert max(tokenizer.encode("Throughput is counted in tokens per second.")) < config["vocab_size"]


def test_make_model_writes_a_role_tagged_chat_template(narrow_model):
    tokenizer = AutoTokenizer.from_pretrained(narrow_model)
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello"}]
    assert tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True) == (
        "<|system|>\nBe brief.\n<|user|>\nHello\n<|assistant|>\n")


def test_make_model_is_reproducible_from_its_seed(narrow_model, tmp_path):
    make_narrow_model(tmp_path / "same")
    make_narrow_model(tmp_path / "other", seed=1)
    weights = (narrow_model / "model.safetensors").read_bytes()
    assert (tmp_path / "same" / "model.safetensors").read_bytes() == weights
    assert (tmp_path / "other" / "model.safetensors").read_bytes() != weights


# ---- workloads and the baseline's batches ---------------------------------------------
def test_workloads_are_reproducible_and_keep_their_lengths():
    token_ids = usable_token_ids(1000, special_ids={0, 1, 999})
    mixed = build_workload("mixed", 64, token_ids, seed=3)
    assert mixed == build_workload("mixed", 64, token_ids, seed=3)
    assert mixed != build_workload("mixed", 64, token_ids, seed=4)
    assert all(32 <= len(r.prompt_token_ids) <= 512 and 32 <= r.max_tokens <= 256 for r in mixed.requests)
    assert not {0, 1, 999} & {t for r in mixed.requests for t in r.prompt_token_ids}
    fixed = build_workload("fixed", 64, token_ids, seed=3)
    assert {(len(r.prompt_token_ids), r.max_tokens) for r in fixed.requests} == {(128, 64)}
    assert (fixed.prompt_tokens, fixed.output_tokens) == (64 * 128, 64 * 64)


def test_unknown_workload_names_the_choices():
    with pytest.raises(ValueError, match="mixed, fixed"):
        build_workload("bursty", 4, [5, 6], seed=0)


def test_baseline_batches_are_left_padded():
    requests = [BenchRequest([7, 8, 9], 4), BenchRequest([5], 4)]
    input_ids, attention_mask = left_padded_batch(requests)
    assert input_ids.tolist() == [[7, 8, 9], [PAD_TOKEN_ID, PAD_TOKEN_ID, 5]]
    assert attention_mask.tolist() == [[1, 1, 1], [0, 0, 1]]


# ---- throughput end to end ------------------------------------------------------------
@pytest.mark.cpu_isa
def test_throughput_compares_engine_and_transformers(narrow_model, tmp_path, capsys):
    report_file = tmp_path / "bench.json"
    code = main(["throughput", "--model", str(narrow_model), "--workload", "all", "--num-prompts", "4",
                 "--length-scale", QUICK_LENGTH_SCALE, "--output-json", str(report_file)])
    assert code == 0
    report = json.loads(report_file.read_text())
    assert report["settings"]["engine"]["dtype"] == "bfloat16"
    assert report["machine"]["torch_threads"] == torch.get_num_threads()
    assert set(report["workloads"]) == {"mixed", "fixed", "shared-prefix"}
    shared = report["workloads"]["shared-prefix"]
    with_cache, without_cache = shared["autoglm"], shared["autoglm (no prefix cache)"]
    assert with_cache["output_tokens"] == without_cache["output_tokens"]
    assert with_cache["prefix_cache_hit_rate"] > 0.5 and without_cache["prefix_cache_hit_rate"] == 0
    assert shared["prefix_cache_ttft_speedup"] == pytest.approx(without_cache["median_ttft_s"] / with_cache["median_ttft_s"])
    for name, sides in report["workloads"].items():
        engine, baseline = sides["autoglm"], sides["transformers"]
        assert SIDE_KEYS <= engine.keys() and SIDE_KEYS <= baseline.keys()
        assert engine["num_requests"] == baseline["num_requests"] == 4
        assert engine["output_tokens"] == baseline["output_tokens"] > 0
        assert engine["prompt_tokens"] == baseline["prompt_tokens"] > 0
        assert all(engine[key] > 0 and baseline[key] > 0 for key in ("elapsed_s", "output_tokens_per_s"))
        assert engine["median_ttft_s"] > 0 and engine["num_preemptions"] >= 0
        assert engine["profile"] is None
        ratios = sides["ratios"]
        assert ratios["output_tokens_per_s"] == pytest.approx(engine["output_tokens_per_s"] / baseline["output_tokens_per_s"])
    table = capsys.readouterr().out
    assert "ratio" in table and "transformers" in table


@pytest.mark.cpu_isa
def test_throughput_profile_accounts_for_each_phase(narrow_model, tmp_path, capsys):
    report_file = tmp_path / "bench.json"
    main(["throughput", "--model", str(narrow_model), "--workload", "fixed", "--num-prompts", "3",
          "--length-scale", QUICK_LENGTH_SCALE, "--baseline", "none", "--profile", "--output-json", str(report_file)])
    profile = json.loads(report_file.read_text())["workloads"]["fixed"]["autoglm"]["profile"]
    assert profile["num_steps"] >= 4  # one prefill step, then one per further token
    phases = profile["phases_s"]
    assert set(phases) == {"schedule", "prepare inputs", "forward", "sample", "detokenize & outputs"}
    assert all(seconds > 0 for seconds in phases.values())
    assert sum(phases.values()) <= profile["step_s"]
    parts = profile["forward_parts_s"]
    assert parts["attention"] > 0 and parts["linear"] > 0
    assert sum(parts.values()) == pytest.approx(phases["forward"])
    assert profile["overhead_s"] == pytest.approx(profile["step_s"] - phases["forward"])
    paths = profile["linear_paths"]
    assert set(paths) == {"qkv_proj", "o_proj", "gate_up_proj", "down_proj", "lm_head"}
    calls = {projection: sum(by_path.values()) for projection, by_path in paths.items()}
    assert calls["qkv_proj"] == calls["o_proj"] == calls["gate_up_proj"] == calls["down_proj"] >= profile["num_steps"]
    out = capsys.readouterr().out
    assert "where a step's time goes" in out and "which path each projection took" in out


def test_shared_prefix_requests_share_one_prompt_prefix():
    token_ids = list(range(10, 1000))
    workload = build_workload("shared-prefix", None, token_ids, seed=1)
    assert len(workload.requests) == 32
    prefix = workload.requests[0].prompt_token_ids[:1024]
    for request in workload.requests:
        assert len(request.prompt_token_ids) == 1024 + 64 and request.prompt_token_ids[:1024] == prefix
    assert len({tuple(request.prompt_token_ids[1024:]) for request in workload.requests}) == 32


@pytest.mark.cpu_isa
def test_throughput_without_baseline_runs_the_engine_alone(narrow_model, tmp_path):
    report_file = tmp_path / "bench.json"
    main(["throughput", "--model", str(narrow_model), "--workload", "fixed", "--num-prompts", "2",
          "--length-scale", QUICK_LENGTH_SCALE, "--baseline", "none", "--output-json", str(report_file)])
    sides = json.loads(report_file.read_text())["workloads"]["fixed"]
    assert set(sides) == {"autoglm"}
    assert sides["autoglm"]["output_tokens"] == 2 * 4


@pytest.mark.cpu_isa
def test_throughput_draws_tokens_on_both_sides_under_the_sampling_settings(narrow_model, tmp_path, monkeypatch):
    seen = []
    original_generate = GenerationMixin.generate

    def recording_generate(self, *args, **kwargs):
        seen.append({key: kwargs.get(key) for key in ("do_sample", "temperature", "top_p", "top_k")})
        return original_generate(self, *args, **kwargs)

    monkeypatch.setattr(GenerationMixin, "generate", recording_generate)
    engine_params = []
    original_llm_generate = LLM.generate

    def recording_llm_generate(self, prompts, params, **kwargs):
        engine_params.extend(params)
        return original_llm_generate(self, prompts, params, **kwargs)

    monkeypatch.setattr(LLM, "generate", recording_llm_generate)
    report_file = tmp_path / "bench.json"
    main(["throughput", "--model", str(narrow_model), "--workload", "fixed", "--num-prompts", "2",
          "--length-scale", QUICK_LENGTH_SCALE, "--temperature", "0.8", "--top-p", "0.9", "--top-k", "0",
          "--output-json", str(report_file)])
    report = json.loads(report_file.read_text())
    assert report["settings"]["sampling"] == {"temperature": 0.8, "top_p": 0.9, "top_k": 0}
    sides = report["workloads"]["fixed"]
    assert sides["autoglm"]["output_tokens"] == sides["transformers"]["output_tokens"] == 2 * 4
    assert [(p.temperature, p.top_p, p.top_k) for p in engine_params] == [(0.8, 0.9, 0)] * 2
    # transformers' own default top_k (50) must not narrow its side
    assert seen and all(call == {"do_sample": True, "temperature": 0.8, "top_p": 0.9, "top_k": 0} for call in seen)


@pytest.mark.cpu_isa
def test_throughput_records_the_quantization_and_kv_cache_it_ran_with(narrow_model, tmp_path, capsys):
    report_file = tmp_path / "bench.json"
    main(["throughput", "--model", str(narrow_model), "--workload", "fixed", "--num-prompts", "2",
          "--length-scale", QUICK_LENGTH_SCALE, "--baseline", "none", "--quantization", "int4",
          "--quantization-group-size", "32", "--quantize-lm-head", "--kv-cache-dtype", "int8",
          "--output-json", str(report_file)])
    report = json.loads(report_file.read_text())
    settings = report["settings"]["engine"]
    assert (settings["quantization"], settings["quantization_group_size"], settings["kv_cache_dtype"]) == (
        "int4", 32, "int8")
    engine = report["workloads"]["fixed"]["autoglm"]
    assert (engine["weights"], engine["kv_cache_dtype"]) == ("int4 g32, int4 head", "int8")
    assert "with int4 g32, int4 head weights and kv_cache_dtype int8" in capsys.readouterr().out


@pytest.mark.cpu_isa
def test_throughput_from_the_command_line_shows_each_sides_progress(narrow_model, capsys):
    assert autoglm_main(["bench", "throughput", "--model", str(narrow_model), "--workload", "fixed",
                         "--num-prompts", "2", "--length-scale", QUICK_LENGTH_SCALE]) == 0
    progress = capsys.readouterr().err
    assert "generate: 100%" in progress and "fixed / transformers: 100%" in progress
