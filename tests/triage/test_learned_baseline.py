"""The learned baseline used to measure how far the development half generalises."""

import random
from pathlib import Path

from tests.triage.corpus_eval import Entry
from tests.triage.learned_baseline import Example, NaiveBayes, leave_one_thread_out


def _example(n: int, category: str, words: str) -> Example:
    entry = Entry(f"log{n}", Path(f"/nowhere/{n}.log"), f"https://example.org/t/{n}", "vllm", category)
    return Example(entry, frozenset(words.split()))


EXAMPLES = [
    _example(1, "cuda.nccl", "nccl error watchdog collective"),
    _example(2, "cuda.nccl", "nccl timeout allreduce"),
    _example(3, "oom.gpu", "cuda out memory tried allocate"),
    _example(4, "oom.gpu", "outofmemoryerror tried allocate gib"),
]


def test_the_category_whose_words_a_log_shares_wins():
    model = NaiveBayes(EXAMPLES)
    assert model.predict(frozenset({"nccl", "collective"})) == "cuda.nccl"
    assert model.predict(frozenset({"allocate", "memory"})) == "oom.gpu"


def test_each_thread_is_predicted_by_a_model_that_never_saw_it():
    # Every thread's words also occur in the other thread of its category, so all four are right;
    # a model trained with the thread itself would be right for any words.
    assert leave_one_thread_out(EXAMPLES, 1.0, random.Random(1)) == 1.0
    lonely = [*EXAMPLES, _example(5, "gpu.thermal", "throttle temperature")]
    assert leave_one_thread_out(lonely, 1.0, random.Random(1)) == 4 / 5
