"""Hand-written STAND-IN answers for the causal attention seed and its descendants (not a language
model's): whole modules and SEARCH/REPLACE edits, good and bad, the mix of outcomes a model gives.
Good: the scores kept out of memory with an online softmax that visits only the key blocks up to the
diagonal; the same with the mask applied only to the blocks the diagonal crosses (FlashAttention-2's
split); bigger tiles. Wrong: the diagonal itself masked out (row 0 sees no key), the key blocks
above the diagonal skipped but the diagonal block left unmasked (queries see later keys), an
accumulator never rescaled when the row maximum grows, an edit that does not apply, a reply with
no code."""

from bench.search.standin_replies.attention import HEADER, LAUNCH  # the same module header, PARAMS, SPACE and launch

_CAUSAL = '''
@triton.jit
def _causal_online(q_ptr, k_ptr, v_ptr, o_ptr, seq, head_dim, scale,
                   BM: tl.constexpr, BN: tl.constexpr, BLOCK_D: tl.constexpr):
    start_m = tl.program_id(0)
    bh = tl.program_id(1)
    base = bh * seq * head_dim
    rows = start_m * BM + tl.arange(0, BM)
    dims = tl.arange(0, BLOCK_D)
    d_ok = dims[None, :] < head_dim
    q = tl.load(q_ptr + base + rows[:, None] * head_dim + dims[None, :], mask=(rows[:, None] < seq) & d_ok,
                other=0.0)
    m_i = tl.full((BM,), -float("inf"), tl.float32)
    l_i = tl.zeros((BM,), tl.float32)
    acc = tl.zeros((BM, BLOCK_D), tl.float32)
    hi = tl.minimum(seq, (start_m + 1) * BM)  # no key past this query block's last row is visible
    for start_n in range(0, hi, BN):
        cols = start_n + tl.arange(0, BN)
        kv_mask = (cols[:, None] < seq) & d_ok
        k = tl.load(k_ptr + base + cols[:, None] * head_dim + dims[None, :], mask=kv_mask, other=0.0)
        s = tl.dot(q, tl.trans(k)) * scale
        s = tl.where((cols[None, :] <= rows[:, None]) & (cols[None, :] < seq), s, -float("inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        alpha = tl.exp(m_i - m_new)
        p = tl.exp(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        v = tl.load(v_ptr + base + cols[:, None] * head_dim + dims[None, :], mask=kv_mask, other=0.0)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
    acc = acc / l_i[:, None]
    tl.store(o_ptr + base + rows[:, None] * head_dim + dims[None, :], acc.to(o_ptr.dtype.element_ty),
             mask=(rows[:, None] < seq) & d_ok)
'''
_CAUSAL_MODULE = HEADER + _CAUSAL + LAUNCH.replace("KERNEL", "_causal_online")

CAUSAL_ONLINE = ("The scores make three round trips through a buffer as large as the attention matrix, and the key "
                 "blocks above the diagonal are computed only to be masked. Keep the scores in registers with an "
                 "online softmax (running max and sum, the accumulator rescaled when the max grows), and stop each "
                 "query block's loop at its diagonal: half the blocks are never visited.\n```python\n"
                 + _CAUSAL_MODULE + "```")
NO_RESCALE = ("Online softmax up to the diagonal; the accumulator needs no correction because the sum is "
              "rescaled.\n```python\n"
              + _CAUSAL_MODULE.replace("acc = acc * alpha[:, None] + tl.dot", "acc = acc + tl.dot") + "```")
STRICT_MASK = ("Online softmax up to the diagonal, each query attending to the keys before it.\n```python\n"
               + _CAUSAL_MODULE.replace("cols[None, :] <= rows[:, None]", "cols[None, :] < rows[:, None]") + "```")
DIAGONAL_UNMASKED = ("Stopping each query block's loop at its diagonal already enforces causality, so the mask "
                     "only has to cut the sequence's tail.\n```python\n"
                     + _CAUSAL_MODULE.replace("(cols[None, :] <= rows[:, None]) & (cols[None, :] < seq)",
                                              "cols[None, :] < seq") + "```")

_SPLIT = '''
@triton.jit
def _kv_blocks(acc, m_i, l_i, q, k_ptr, v_ptr, base, rows, dims, lo, hi, seq, head_dim, qk_scale,
               ON_DIAGONAL: tl.constexpr, BN: tl.constexpr):
    for start_n in range(lo, hi, BN):
        cols = start_n + tl.arange(0, BN)
        kv_mask = dims[None, :] < head_dim
        if ON_DIAGONAL:
            kv_mask = kv_mask & (cols[:, None] < seq)
        k = tl.load(k_ptr + base + cols[:, None] * head_dim + dims[None, :], mask=kv_mask, other=0.0)
        s = tl.dot(q, tl.trans(k)) * qk_scale
        if ON_DIAGONAL:
            s = tl.where((cols[None, :] <= rows[:, None]) & (cols[None, :] < seq), s, -float("inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        alpha = tl.math.exp2(m_i - m_new)
        p = tl.math.exp2(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        v = tl.load(v_ptr + base + cols[:, None] * head_dim + dims[None, :], mask=kv_mask, other=0.0)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
    return acc, m_i, l_i


@triton.jit
def _causal_split(q_ptr, k_ptr, v_ptr, o_ptr, seq, head_dim, scale,
                  BM: tl.constexpr, BN: tl.constexpr, BLOCK_D: tl.constexpr):
    start_m = tl.program_id(0)
    bh = tl.program_id(1)
    base = bh * seq * head_dim
    rows = start_m * BM + tl.arange(0, BM)
    dims = tl.arange(0, BLOCK_D)
    out_mask = (rows[:, None] < seq) & (dims[None, :] < head_dim)
    q = tl.load(q_ptr + base + rows[:, None] * head_dim + dims[None, :], mask=out_mask, other=0.0)
    qk_scale = scale * 1.4426950408889634  # log2(e): exp2 instead of exp
    m_i = tl.full((BM,), -float("inf"), tl.float32)
    l_i = tl.zeros((BM,), tl.float32)
    acc = tl.zeros((BM, BLOCK_D), tl.float32)
    below = start_m * BM // BN * BN  # key blocks that end before this query block's first row: all visible
    hi = tl.minimum(seq, (start_m + 1) * BM)
    acc, m_i, l_i = _kv_blocks(acc, m_i, l_i, q, k_ptr, v_ptr, base, rows, dims, 0, below, seq, head_dim,
                               qk_scale, ON_DIAGONAL=False, BN=BN)
    acc, m_i, l_i = _kv_blocks(acc, m_i, l_i, q, k_ptr, v_ptr, base, rows, dims, below, hi, seq, head_dim,
                               qk_scale, ON_DIAGONAL=True, BN=BN)
    acc = acc / l_i[:, None]
    tl.store(o_ptr + base + rows[:, None] * head_dim + dims[None, :], acc.to(o_ptr.dtype.element_ty), mask=out_mask)
'''
DIAGONAL_SPLIT = ("Online softmax up to the diagonal, and only the key blocks the diagonal crosses need the causal "
                  "mask: the blocks wholly below it run without one (FlashAttention-2's split), with exp2 and "
                  "log2(e) folded into the scale.\n```python\n"
                  + HEADER + _SPLIT + LAUNCH.replace("KERNEL", "_causal_split") + "```")

BIGGER_TILES = '''16 x 16 tiles are too small for tensor cores; use 64 x 64.
<<<<<<< SEARCH
PARAMS = {"BM": 16, "BN": 16, "num_warps": 4}
=======
PARAMS = {"BM": 64, "BN": 64, "num_warps": 4}
>>>>>>> REPLACE'''
NO_CODE = ("Causal attention at these sizes is compute-bound on the two matmuls, half of them masked; the kernel is "
           "reasonable as it stands.")
WRONG_EDIT = '''Skip the key blocks above the diagonal in the first pass.
<<<<<<< SEARCH
    for start_n in range(0, seq, BN):
        k = tl.load(k_ptr + base + cols[:, None] * head_dim + dims[None, :])
=======
    for start_n in range(0, (start_m + 1) * BM, BN):
        k = tl.load(k_ptr + base + cols[:, None] * head_dim + dims[None, :])
>>>>>>> REPLACE'''
REPLIES: tuple[tuple[int, str], ...] = (  # (weight, reply)
    (2, CAUSAL_ONLINE), (1, DIAGONAL_SPLIT), (2, NO_RESCALE), (1, STRICT_MASK), (1, DIAGONAL_UNMASKED),
    (1, BIGGER_TILES), (1, NO_CODE), (1, WRONG_EDIT),
)
