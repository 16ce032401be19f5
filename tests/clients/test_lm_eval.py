"""lm-evaluation-harness' local-completions with only `model` and `base_url` in its model_args, as its docs
write it: it finds the server's tokenizer through /tokenizer_info and /tokenize (never the hub), sends
token ids with echo and logprobs, and the log-likelihoods it records are transformers' on the same weights."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from tests.clients.replies import MODEL
from tests.optional_packages import import_client

import_client("lm_eval", "lm-eval")

pytestmark = pytest.mark.timeout(180)

TASK = "autoglm_tiny_choice"
DOCUMENTS = [
    {"question": "The quick brown", "choices": ["fox", "dog", "sea of troubles"], "answer": 0},
    {"question": "To be, or not to", "choices": ["be", "take arms"], "answer": 0},
]
LOGLIKELIHOOD_TOLERANCE = 1e-3  # float32 sums of a few log-probs, the server's kernels against transformers'


def write_task(folder: Path) -> None:
    """A multiple-choice task over DOCUMENTS, read from a local file (no hub)."""
    data = folder / "documents.jsonl"
    data.write_text("".join(json.dumps(document) + "\n" for document in DOCUMENTS))
    (folder / f"{TASK}.yaml").write_text(
        f"task: {TASK}\ndataset_path: json\ndataset_kwargs:\n  data_files:\n    test: {data}\ntest_split: test\n"
        "output_type: multiple_choice\ndoc_to_text: '{{question}}'\ndoc_to_choice: '{{choices}}'\n"
        "doc_to_target: '{{answer}}'\nmetric_list:\n  - metric: acc\n")


# lm-eval's Python entry point, in a process of its own (it seeds the global generators and reads the hub's
# settings on import); its task index holds only the folder's task, as the command line's would take 30 s.
EVALUATE = """
import json, sys
from lm_eval import simple_evaluate
from lm_eval.tasks import TaskManager
url, task, folder = sys.argv[1:]
results = simple_evaluate(model="local-completions", model_args=f"model={MODEL},base_url={url}/v1/completions",
                          tasks=[task], task_manager=TaskManager(include_path=folder, include_defaults=False),
                          log_samples=True)
print(json.dumps(results["samples"][task], default=str))
"""


def run_lm_eval(url: str, folder: Path) -> list[dict]:
    """lm-eval on the task in `folder`; the samples it logged."""
    command = [sys.executable, "-c", f"MODEL = {MODEL!r}\n{EVALUATE}", url, TASK, str(folder)]
    offline = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "HF_DATASETS_CACHE": str(folder / "cache")}
    finished = subprocess.run(command, env={**os.environ, **offline}, capture_output=True, text=True, timeout=150)
    assert finished.returncode == 0, finished.stdout[-3000:] + finished.stderr[-3000:]
    return json.loads(finished.stdout.splitlines()[-1])


def transformers_loglikelihood(model, tokenizer, context: str, continuation: str) -> float:
    """The continuation's log-likelihood after the context, split as lm-eval splits the pair's tokens."""
    context_ids = tokenizer(context, add_special_tokens=False)["input_ids"]
    whole = tokenizer(context + continuation, add_special_tokens=False)["input_ids"]
    with torch.inference_mode():
        logprobs = torch.log_softmax(model(torch.tensor([whole])).logits[0].float(), -1)
    return sum(logprobs[i - 1, whole[i]].item() for i in range(len(context_ids), len(whole)))


def test_local_completions_with_only_model_and_base_url_scores_as_transformers(client_server, qwen_model,
                                                                                tmp_path):
    info = httpx.get(client_server.url + "/tokenizer_info", timeout=30)
    assert info.status_code == 200, "without /tokenizer_info lm-eval downloads the model's name from the hub"
    write_task(tmp_path)
    samples = run_lm_eval(client_server.url, tmp_path)
    assert len(samples) == len(DOCUMENTS)
    model = AutoModelForCausalLM.from_pretrained(qwen_model, dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(qwen_model)
    for sample in samples:
        pairs = [(context, continuation) for context, continuation in sample["arguments"]]
        assert [context for context, _ in pairs] == [DOCUMENTS[sample["doc_id"]]["question"]] * len(pairs)
        got = [loglikelihood for loglikelihood, _ in sample["filtered_resps"]]
        expected = [transformers_loglikelihood(model, tokenizer, *pair) for pair in pairs]
        assert got == pytest.approx(expected, abs=LOGLIKELIHOOD_TOLERANCE)
        best = max(range(len(expected)), key=expected.__getitem__)
        assert sample["acc"] == float(best == DOCUMENTS[sample["doc_id"]]["answer"])
