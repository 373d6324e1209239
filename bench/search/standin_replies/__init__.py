"""Hand-written STAND-IN answers per library task, which `bench/search/record_standin_llm.py` serves from the
fake OpenAI-compatible server and records; the ablations replay the records. Not a language model's."""

from bench.search.standin_replies import (
    attention,
    attention_causal,
    layernorm,
    matmul,
    mla_decode,
    reduction,
    softmax,
    vector_add,
)

REPLIES_BY_TASK: dict[str, tuple[tuple[int, str], ...]] = {
    "softmax": softmax.REPLIES,
    "layernorm": layernorm.REPLIES,
    "attention": attention.REPLIES,
    "attention_causal": attention_causal.REPLIES,
    "matmul": matmul.REPLIES,
    "mla_decode": mla_decode.REPLIES,
    "reduction": reduction.REPLIES,
    "vector_add": vector_add.REPLIES,
}
