#!/usr/bin/env python3
"""Write the hand-made seed inputs of graph_fuzz and tokenizer_fuzz (tests/fuzz/corpus/<name>/seed-*).

Each seed is a small valid program in the target's byte format (the comment at the top of
tests/fuzz/graph_fuzz.cpp and tests/fuzz/tokenizer_fuzz.cpp), chosen to reach deep: whole
graphs that plan and compute, vocabularies that load and encode. The fuzzer mutates from
there. Inputs the fuzzers found (regress-*) are committed next to them as they were found.
    scripts/gen-fuzz-corpus.py        (rewrites the seed-* files, leaves the rest alone)
"""
import os
import struct

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fuzz", "corpus")

# ---- graph_fuzz ------------------------------------------------------------------------
F32, F16, I32, Q8_0, Q4_0, BF16 = 0, 3, 4, 5, 6, 7
(NEW, UNARY, BINARY, MUL_MAT, VIEW, RESHAPE, PERMUTE, TRANSPOSE, CPY, CONT, REDUCE, NORM, ROWS,
 SOFT_MAX, ROPE, SHAPE, CONV, ATTN) = range(18)
BIG = {32: 0xF2, 33: 0xF3, 64: 0xF4, 256: 0xF5, 4096: 0xF6, 1 << 20: 0xF7, 1 << 31: 0xF8, 1 << 40: 0xF9,
       -1: 0xFC, 65536: 0xFE}
CAPACITY = {0: 0, 1: 1, 2: 2, 3: 3, 4: 4, 5: 5, 8: 6, 16: 7, 64: 8, 2048: 9}
TWO_THREADS, BEST_ISA, PACK_BUDGET, NO_RESERVE = 1, 2, 4, 8
F_ONE, F_HALF, F_EIGHTH = 2, 4, 2 + 0  # f32 bytes: specials 0..9, else int8/16


def dim(n):
    return [n] if 0 <= n <= 8 else [BIG[n]]


def f32(x):
    """the byte of an exact small value (int8 / 16) or a special one"""
    specials = {1.0: 2, -1.0: 3, 0.5: 4, 1e-6: 5}
    if x in specials:
        return [specials[x]]
    b = int(round(x * 16)) & 0xFF
    assert b >= 10, x
    return [b]


def i8(n):
    return [n & 0xFF]


def new(t, *ne, inp=1):
    out = [NEW, t, len(ne) - 1]
    for n in ne:
        out += dim(n)
    return out + [inp]


def graph(ctx_headers, capacity, settings, *ops):
    b = [ctx_headers, CAPACITY[capacity], settings]
    for op in ops:
        b += op
    return bytes(b)


GRAPH_SEEDS = {
    # x [8, 4], w [8, 8]: rms_norm(silu(w x)) then soft_max, one thread, scalar
    "mlp": graph(40, 16, 0,
                 new(F32, 8, 4), new(F32, 8, 8),
                 [MUL_MAT, 1, 0, 0], [NORM, 2, 1] + f32(1e-6), [UNARY, 3, 0, 7], [SOFT_MAX, 4, 1]),
    # the same with two threads, the best ISA and a packing budget
    "mlp-2t-best": graph(40, 16, TWO_THREADS | BEST_ISA | PACK_BUDGET,
                         new(F32, 8, 4), new(F32, 8, 8),
                         [MUL_MAT, 1, 0, 0], [NORM, 2, 0] + f32(1e-6), [UNARY, 3, 0, 5], [SOFT_MAX, 4, 0, 1, 4] + f32(0.5) + [0]),
    # flash attention: q f32 [8, 4, 2], k and v f16 [8, 6, 2], mask f16 [6, 4]
    "attention": graph(40, 16, BEST_ISA,
                       new(F32, 8, 4, 2), new(F16, 8, 6, 2), new(F16, 8, 6, 2), new(F16, 6, 4),
                       [ATTN, 0, 1, 2, 1, 3] + f32(0.5) + [0, 0]),
    # views: permute, cont, reshape, transpose, a strided 2-d view, mul_mat on it
    "views": graph(40, 16, TWO_THREADS,
                   new(F32, 4, 3, 2), [PERMUTE, 0, 1], [CONT, 1, 0, 0, 0, 0, 0], [RESHAPE, 2, 1, 6, 4, 0, 0],
                   [TRANSPOSE, 3], [VIEW, 0, 1, 4, 2, 0, 0] + list(struct.pack("<HHHH", 16, 0, 0, 8)),
                   [CONT, 4, 0, 0, 0, 0, 0], [MUL_MAT, 6, 5, 0]),
    # quantized rows: get_rows from q8_0 [32, 5], broadcast add, sum_rows, argmax
    "rows-q8": graph(40, 16, BEST_ISA,
                     new(Q8_0, 32, 5), new(I32, 3), [ROWS, 0, 1], new(F32, 32, 1), [BINARY, 2, 3, 0],
                     [REDUCE, 4, 1], [REDUCE, 4, 3]),
    # rope on [8, 2, 3] with positions i32 [3], then cpy into f16, set_rows
    "rope": graph(40, 16, 0,
                  new(F32, 8, 2, 3), new(I32, 3), [ROPE, 0, 1, 8, 0, 1], [ROPE, 0, 1, 8, 2, 0, 0] + f32(1.0) * 3 + [0],
                  new(F16, 8, 2, 3), [CPY, 2, 0, 4], [CPY, 3, 1, F16]),
    # convolution: kernel f16 [3, 3, 2, 4], input [6, 6, 2, 1], conv_2d + pool + upscale + pad
    "conv": graph(40, 16, TWO_THREADS | BEST_ISA,
                  new(F16, 3, 3, 2, 4), new(F32, 6, 6, 2, 1), [CONV, 0, 1, 1] + i8(1) * 2 + i8(1) * 2 + i8(1) * 2,
                  [SHAPE, 2, 3] + i8(2) * 4 + [0, 0, 0], [SHAPE, 3, 0] + i8(2) + [1], [SHAPE, 4, 2] + i8(1) * 4,
                  [CONV, 0, 1, 2 | 4] + i8(1) * 2 + i8(0) * 2 + i8(1) * 2),
    # zero-size tensors everywhere: [0, 3] through soft_max, add, mul_mat, concat
    "zero-size": graph(40, 16, 0,
                       new(F32, 0, 3), [SOFT_MAX, 0, 1], new(F32, 0, 3), [BINARY, 1, 2, 0], [MUL_MAT, 0, 2, 0],
                       [BINARY, 3, 0, 8, 1], [REDUCE, 0, 0]),
    # graph capacity 1 and a chain of four ops: the graph is full (an error), nothing runs
    "graph-full": graph(40, 1, 0,
                        new(F32, 4, 4), [UNARY, 0, 1], [UNARY, 1, 2], [UNARY, 2, 4] + f32(0.5), [UNARY, 3, 7]),
    # huge shapes that must be refused, then a mul_mat whose result exceeds the host cap
    "huge": graph(40, 16, 0,
                  new(F32, 1 << 40, 1 << 40), new(F32, 4096, 1), new(F32, 4096, 256), [MUL_MAT, 0, 1, 0],
                  [RESHAPE, 1, 1] + dim(1 << 31) * 2 + [0, 0], new(F32, 64, 4096), [MUL_MAT, 2, 3, 1]),
    # alloc_graph without reserve, norms and reductions on f16/bf16
    "no-reserve": graph(40, 64, NO_RESERVE | TWO_THREADS,
                        new(F16, 8, 3, 2), new(BF16, 8, 3, 2), [BINARY, 0, 1, 2], [NORM, 2, 2] + f32(1e-6) + i8(2),
                        [UNARY, 3, 10, 1], [REDUCE, 3, 0], [UNARY, 0, 9] + i8(1)),
}

# ---- tokenizer_fuzz --------------------------------------------------------------------
SPM, BYTES, SPACE_PREFIX, ADD_BOS, SCORES, TYPES, SPECIAL_IDS, MERGES = (1 << i for i in range(8))
NORMAL, CONTROL, BYTE = 0, 2, 5  # type bytes: 1 + b % 7


def byte_symbol(b):
    """GPT-2's bytes_to_unicode spelling of one byte"""
    keep = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    if b in keep:
        return chr(b)
    return chr(256 + sorted(set(range(256)) - set(keep)).index(b))


def vocab(flags, extra, merges, special=(), text=b""):
    """extra: (bytes, score, type byte); merges: (left, right) indices counted back from the last token"""
    out = [flags, len(extra), len(merges)]
    for tok, score, typ in extra:
        out += [len(tok)] + list(tok) + [score & 0xFF, typ]
    for a, b in merges:
        out += [a, b]
    out += list(special)
    return bytes(out) + text


def back(n_tokens, index):
    return n_tokens - 1 - index


G = lambda s: "".join(byte_symbol(b) for b in s.encode()).encode()  # noqa: E731
GPT2_EXTRA = [(G("he"), 0, NORMAL), (G("the"), 0, NORMAL), (G(" the"), 0, NORMAL), (G("ll"), 0, NORMAL)]


def gpt2_merges(n):
    """h e, t he, Ġ the, l l for a vocabulary of n tokens (the byte symbols, then GPT2_EXTRA)"""
    return [(back(n, ord("h")), back(n, ord("e"))), (back(n, ord("t")), back(n, 256)),
            (back(n, 32), back(n, 257)), (back(n, ord("l")), back(n, ord("l")))]


SP = "\u2581".encode()
SPM_EXTRA = [(SP, -1, NORMAL), (b"h", -2, NORMAL), (b"e", -2, NORMAL), (b"l", -2, NORMAL), (b"o", -2, NORMAL),
             (SP + b"h", -1, NORMAL), (b"ll", -1, NORMAL), (SP + b"he", 0, NORMAL), (SP + b"hell", 1, NORMAL),
             (SP + b"hello", 2, NORMAL), (b"<s>", 0, CONTROL)]
TEXT = "hello the world, caf\u00e9 \u20ac 12\n\n  x".encode() + b"\xff\xc3(\xe2\x82"

TOKENIZER_SEEDS = {
    "gpt2-bpe": vocab(BYTES | MERGES | TYPES, GPT2_EXTRA, gpt2_merges(260), text=TEXT),
    # a duplicate token, merges naming tokens that are not there
    "gpt2-missing-merges": vocab(BYTES | MERGES, GPT2_EXTRA + [(G("he"), 0, NORMAL)],
                                 gpt2_merges(261) + [(0xFF, 3), (2, 0xFF)], text=TEXT),
    "gpt2-control": vocab(BYTES | MERGES | TYPES | SPECIAL_IDS, GPT2_EXTRA + [(b"<|eot|>", 0, CONTROL)],
                          gpt2_merges(261), special=(0, 0, 0xFF), text=b"the <|eot|> he"),
    "spm-bytes": vocab(SPM | BYTES | SPACE_PREFIX | ADD_BOS | SCORES | TYPES | SPECIAL_IDS, SPM_EXTRA, [],
                       special=(0, 1, 0xFF), text=TEXT),
    "spm-no-bytes-unk": vocab(SPM | SCORES | SPECIAL_IDS, [(b"<unk>", 0, 1)] + SPM_EXTRA[:10], [],
                              special=(0xFF, 0xFF, 0), text=TEXT),
    "spm-no-prefix": vocab(SPM | BYTES | SCORES, SPM_EXTRA, [], text=b" hello  hello" + SP + b"x"),
    "empty": vocab(0, [], [], text=b"abc"),
    "empty-spm": vocab(SPM | SPECIAL_IDS, [], [], special=(1, 2, 0), text=b"abc"),
}


def write(name, seeds):
    folder = os.path.join(ROOT, name)
    os.makedirs(folder, exist_ok=True)
    for f in os.listdir(folder):
        if f.startswith("seed-"):
            os.remove(os.path.join(folder, f))
    for seed, data in seeds.items():
        with open(os.path.join(folder, "seed-" + seed), "wb") as f:
            f.write(data)


write("graph", GRAPH_SEEDS)
write("tokenizer", TOKENIZER_SEEDS)
