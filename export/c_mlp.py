"""The int8 MLP's C header: the single-block path, the x86-64 SSE2/AVX2 batch passes and the
portable tiles, all bit-identical to :class:`dogi_ml.export.quantize.QuantizedMLP` (API in
:mod:`dogi_ml.export.c_header`)."""

from __future__ import annotations

import numpy as np

from .c_common import c_array, epilogue, helpers, prologue, quantize_inputs_fn, rules_doc
from .integer import ACT_MAX, ExportError


def emit_mlp(q, P: str = "dogi", source: str | None = None) -> str:
    dims = q.dims
    if any(
        L.relu and (int(L.shift.min()) < 0 or int(L.shift.max()) > 31 or int(L.mul.max()) > 32767) for L in q.layers
    ):
        raise ExportError("hidden-layer requantisation needs 0 <= p <= 31 and 16-bit multipliers")
    doc = [
        f"int8 MLP {' -> '.join(map(str, dims))}: int8 weights (per output channel), int32 accumulation,",
        f"hidden layers: t = sat16(acc >> p[o]), (t * m16[o]) >> 16, clamped to [0, {ACT_MAX}] (ReLU);",
        "last layer: rshift_round(acc * m[o], s[o]) to int32 logits; class = first index of the",
        "largest logit. On x86-64 the batch path runs 32 blocks per AVX2 pass where the CPU has AVX2",
        "(cpuid), else 16 per SSE2 pass; both give the same integers as the single-block path.",
        "",
    ] + rules_doc(q.inputs)
    out = [prologue(P, f"{P}: deployed lifetime classifier (MLP)", doc, source)]
    out.append(f"#define {P.upper()}_N_FEATURES {q.n_features}\n#define {P.upper()}_N_CLASSES {q.n_classes}\n\n")
    out.append(helpers(P))
    out.append(quantize_inputs_fn(P, q.inputs))
    pad = lambda n: (n + 7) // 8 * 8  # noqa: E731  (rows padded to 8 int16: one 128-bit vector)
    for i, L in enumerate(q.layers):
        n_out, n_in = L.w.shape
        w16 = np.zeros((n_out, pad(n_in)), np.int64)
        w16[:, :n_in] = L.w
        out.append(c_array(f"{P}_w{i}", "int16_t", w16))
        out.append(c_array(f"{P}_b{i}", "int32_t", L.b, 8))
        out.append(c_array(f"{P}_m{i}", "uint32_t", L.mul, 6))
        out.append(c_array(f"{P}_s{i}", "int8_t", L.shift, 16))
    width = pad(max(dims))
    body = [
        f"    int16_t a[{width}], h[{width}];",
        f"    int32_t codes[{q.n_features}], logits_[{q.n_classes}];",
        "    int32_t i, o, c, best, top;",
        f"    for (i = 0; i < {width}; ++i) a[i] = 0;",
        f"    for (i = 0; i < {width}; ++i) h[i] = 0;",
        f"    {P}_quantize_inputs(features, codes);",
        f"    for (i = 0; i < {q.n_features}; ++i) a[i] = (int16_t)codes[i];",
    ]
    src, dst = "a", "h"
    for li, L in enumerate(q.layers):
        n_out, n_in = L.w.shape
        last = li == len(q.layers) - 1
        body += [
            f"    /* layer {li}: {n_in} -> {n_out} */",
            f"    for (o = 0; o < {n_out}; ++o) {{",
            "        int32_t acc = 0;",
            f"        for (i = 0; i < {pad(n_in)}; ++i) acc += (int32_t){P}_w{li}[o][i] * {src}[i];",
            f"        acc += {P}_b{li}[o];",
        ]
        if last:
            body.append(f"        logits_[o] = {P}_logit_requant(acc, {P}_m{li}[o], {P}_s{li}[o]);")
        else:
            body.append(f"        {dst}[o] = {P}_hidden_requant(acc, (int32_t){P}_m{li}[o], {P}_s{li}[o]);")
        body.append("    }")
        src, dst = dst, src
    body += [
        "    best = 0;",
        "    top = logits_[0];",
        f"    for (c = 1; c < {q.n_classes}; ++c) {{",
        "        const int32_t better = logits_[c] > top;",
        "        best = better ? c : best;",
        "        top = better ? logits_[c] : top;",
        "    }",
        f"    if (logits) for (c = 0; c < {q.n_classes}; ++c) logits[c] = logits_[c];",
        "    return best;",
    ]
    out.append(
        f"""
/* one block: raw features [{P.upper()}_N_FEATURES] -> class; logits [{P.upper()}_N_CLASSES] (int32) if not 0 */
static inline int32_t {P}_predict_one(const int64_t *features, int32_t *logits)
{{
"""
        + "\n".join(body)
        + "\n}\n"
    )
    out.append(_mlp_simd(q, P))
    out.append(_mlp_tile(q, P))
    out.append(epilogue(P))
    return "".join(out)


def _tile_argmax(U: str) -> list[str]:
    """The batch paths' last step: each block's class (first largest logit) and its logits."""
    return [
        "    for (b = 0; b < nb; ++b) {",
        "        int32_t top = lg[b][0];",
        "        best = 0;",
        f"        for (c = 1; c < {U}_N_CLASSES; ++c) {{",
        "            const int32_t better = lg[b][c] > top;",
        "            best = better ? c : best;",
        "            top = better ? lg[b][c] : top;",
        "        }",
        "        classes[b] = best;",
        f"        if (logits) for (c = 0; c < {U}_N_CLASSES; ++c) logits[(int64_t)b * {U}_N_CLASSES + c] = lg[b][c];",
        "    }",
    ]


#: the two x86-64 batch passes: four vectors of blocks per pass, int16 activation pairs
_ISA = {
    "sse2": {"lanes": 4, "sfx": "128", "vs": "v8hi", "vi": "v4si", "target": ""},
    "avx2": {"lanes": 8, "sfx": "256", "vs": "v16hi", "vi": "v8si", "target": '__attribute__((target("avx2"))) '},
}


def _mlp_simd(q, P: str) -> str:
    """The x86-64 batch passes (GCC): each block's int16 activation pairs sit in one 32-bit lane,
    four vectors of blocks per pass (16 blocks with SSE2, which every x86-64 CPU has; 32 with
    AVX2, chosen at run time by ``cpuid`` unless the build targets AVX2 anyway). Dot products
    are ``pmaddwd`` against broadcast weight pairs; hidden requantisation is
    ``psrad``/``packssdw``/``pmulhw``/``pmaxsw``/``pminsw`` and ``punpck`` back into pairs (the
    pack/unpack lane order cancels out, also across AVX2's 128-bit halves); the last layer's
    exact 64-bit requantisation is per block with SSE2 and ``pmuludq`` on magnitudes with AVX2.
    Same integers as the single-block path (tested)."""
    U = P.upper()
    layers = q.layers
    pairs = [(L.w.shape[1] + 1) // 2 for L in layers]
    width = max([pairs[0]] + [(L.w.shape[0] + 1) // 2 for L in layers[:-1]])
    arrays = []
    for i, L in enumerate(layers):
        n_out, n_in = L.w.shape
        wp = np.zeros((n_out, pairs[i] * 2), np.int64)
        wp[:, :n_in] = L.w
        packed = (wp[:, 0::2] & 0xFFFF) | (wp[:, 1::2] << 16)  # low half w0, high half w1
        packed = np.where(packed >= 1 << 31, packed - (1 << 32), packed)
        arrays.append(c_array(f"{P}_wq{i}", "int32_t", packed))
    passes = [_mlp_simd_pass(q, P, isa, pairs, width) for isa in ("sse2", "avx2")]
    return (
        f"""
/* x86-64 batch passes: GCC with SSE2 (every x86-64 target), and AVX2 where the CPU has it
 * (detected once with cpuid; always when the build targets AVX2). Define {U}_NO_SIMD to use
 * the portable paths instead, {U}_NO_AVX2 to stay with SSE2. Bit-identical to {P}_predict_one. */
#if defined(__x86_64__) && defined(__SSE2__) && defined(__GNUC__) && !defined(__clang__) && !defined({U}_NO_SIMD)
#define {U}_SIMD 1
#if defined(__AVX2__) && !defined({U}_NO_AVX2)
#define {U}_AVX2 2                 /* the build targets AVX2: no run-time check */
#elif !defined({U}_NO_AVX2)
#define {U}_AVX2 1                 /* AVX2 pass chosen at run time */
#else
#define {U}_AVX2 0
#endif
typedef short {P}_v8hi __attribute__((vector_size(16)));
typedef int {P}_v4si __attribute__((vector_size(16)));
"""
        + "".join(arrays)
        + passes[0]
        + f"""
#if {U}_AVX2
typedef short {P}_v16hi __attribute__((vector_size(32)));
typedef int {P}_v8si __attribute__((vector_size(32)));
typedef unsigned long long {P}_v4du __attribute__((vector_size(32)));

/* {P}_logit_requant on 8 lanes: rshift_round(acc * m, s) on magnitudes (|INT32_MIN| = 2^31 as
 * an unsigned lane), saturated to 2^31, the sign put back; a positive 2^31 becomes INT32_MAX */
static inline __attribute__((target("avx2"))) {P}_v8si {P}_logit8({P}_v8si acc, uint32_t m, int32_t s)
{{
    const {P}_v4du zq = {{0, 0, 0, 0}};
    const {P}_v8si zi = {{0, 0, 0, 0, 0, 0, 0, 0}};
    const {P}_v4du mm = zq + m, half = zq + ((UINT64_C(1) << s) >> 1), lim = zq + (UINT64_C(1) << 31);
    const {P}_v8si mag = __builtin_ia32_pabsd256(acc);
    {P}_v4du pe = ({P}_v4du)__builtin_ia32_pmuludq256(mag, ({P}_v8si)mm);
    {P}_v4du po = ({P}_v4du)__builtin_ia32_pmuludq256(({P}_v8si)(({P}_v4du)mag >> 32), ({P}_v8si)mm);
    {P}_v4du ce, co;
    {P}_v8si r;
    pe = (pe + half) >> s;
    po = (po + half) >> s;
    ce = ({P}_v4du)(pe > lim);
    co = ({P}_v4du)(po > lim);
    pe = (ce & lim) | (~ce & pe);
    po = (co & lim) | (~co & po);
    r = __builtin_ia32_pblendd256(({P}_v8si)pe, ({P}_v8si)(po << 32), 0xAA);
    r = __builtin_ia32_psignd256(r, acc);
    return r ^ ((r == zi + INT32_MIN) & (acc > zi));
}}

#if {U}_AVX2 == 1
/* AVX2 usable: the CPU has it and the OS saves the YMM state (cpuid leaves 1 and 7, xgetbv) */
static inline int {P}_cpu_has_avx2(void)
{{
    uint32_t a, b, c, d;
    __asm__("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(0u), "c"(0u));
    if (a < 7u) return 0;
    __asm__("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(1u), "c"(0u));
    if (!((c >> 27) & 1u) || !((c >> 28) & 1u)) return 0;
    __asm__("xgetbv" : "=a"(a), "=d"(d) : "c"(0u));
    if ((a & 6u) != 6u) return 0;
    __asm__("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(7u), "c"(0u));
    return (int)((b >> 5) & 1u);
}}
#endif
"""
        + passes[1]
        + """
#endif
#else
#define """
        + f"""{U}_SIMD 0
#define {U}_AVX2 0
#endif
"""
    )


def _mlp_simd_pass(q, P: str, isa: str, pairs: list, width: int) -> str:
    """One x86-64 batch pass (see :func:`_mlp_simd`): ``P_predict_<isa>``."""
    U = P.upper()
    I = _ISA[isa]
    lanes, sfx, VS, VI = I["lanes"], I["sfx"], f"{P}_{I['vs']}", f"{P}_{I['vi']}"
    blocks = 4 * lanes
    avx = isa == "avx2"
    F, C = q.n_features, q.n_classes
    zs = "{" + ", ".join(["0"] * (2 * lanes)) + "}"
    zi = "{" + ", ".join(["0"] * lanes) + "}"
    bi = lambda name: f"__builtin_ia32_{name}{sfx}"  # noqa: E731
    body = [
        f"    {VS} xa[{width}][4], xb[{width}][4], r0, r1, t0, t1;",
        f"    union {{ {VS} v[{pairs[0]}][4]; int32_t w[{pairs[0]}][{blocks}]; }} in;   /* pair k of block b: w[k][b] */",
        f"    {VI} a0, a1, a2, a3, c0, c1, c2, c3, wv, wc;",
        f"    const {VI} zi = {zi};",
        f"    const {VS} zs = {zs};",
        f"    const {VS} top = zs + {ACT_MAX};",
        f"    int32_t codes[{blocks}][{2 * pairs[0]}], b, k, o, c;",
    ]
    if avx:
        body += [
            f"    union {{ {VI} v[{C}][4]; int32_t s[{C}][4][{lanes}]; }} lg;",
            f"    union {{ {VI} v[4]; int32_t s[4][{lanes}]; }} best;",
            f"    {VI} topv, gt;",
        ]
    else:
        body += [f"    union {{ {VI} v[4]; int32_t s[{blocks}]; }} acc;", f"    int32_t lg[{blocks}][{C}], best;"]
    # all codes first, then the pairs into 32-bit lanes (interleaving the two keeps the
    # compiler from pipelining the input rules and stalls vector loads on narrow stores)
    body += [
        f"    for (b = 0; b < nb; ++b) {P}_quantize_inputs(features + (int64_t)b * {F}, codes[b]);",
        f"    for (; b < {blocks}; ++b) for (k = 0; k < {F}; ++k) codes[b][k] = 0;",
    ]
    if F % 2:
        body.append(f"    for (b = 0; b < {blocks}; ++b) codes[b][{F}] = 0;")
    body += [
        f"    for (k = 0; k < {pairs[0]}; ++k) for (b = 0; b < {blocks}; ++b)",
        "        in.w[k][b] = (int32_t)(((uint32_t)codes[b][2 * k] & 0xFFFFu) | ((uint32_t)codes[b][2 * k + 1] << 16));",
        f"    for (k = 0; k < {pairs[0]}; ++k) for (b = 0; b < 4; ++b) xa[k][b] = in.v[k][b];",
    ]
    src, dst = "xa", "xb"
    accs = (("a0", "a1", "a2", "a3"), ("c0", "c1", "c2", "c3"))
    for i, L in enumerate(q.layers):
        n_out, n_in = L.w.shape
        last = i == len(q.layers) - 1
        body.append(f"    /* layer {i}: {n_in} -> {n_out}, two outputs per step (one load of each input vector) */")
        # the paired loop, then a lone last output when n_out is odd
        steps = [(("o", "o + 1"), f"    for (o = 0; o + 1 < {n_out}; o += 2) {{")]
        if n_out % 2:
            steps.append((("o",), f"    o = {n_out - 1};\n    {{"))
        for outs, head in steps:
            body.append(head)
            for t, ox in enumerate(outs):
                body += [f"        {accs[t][0]} = zi + {P}_b{i}[{ox}];"] + [
                    f"        {accs[t][j]} = {accs[t][0]};" for j in (1, 2, 3)
                ]
            body += [
                f'        _Pragma("GCC unroll {pairs[i]}")   /* straight-line dot products */',
                f"        for (k = 0; k < {pairs[i]}; ++k) {{",
            ]
            body += [f"            {w} = zi + {P}_wq{i}[{ox}][k];" for w, ox in zip(("wv", "wc"), outs)]
            for j in range(4):
                body += [
                    f"            {accs[t][j]} += {bi('pmaddwd')}({src}[k][{j}], ({VS}){w});"
                    for t, w in zip(range(len(outs)), ("wv", "wc"))
                ]
            body.append("        }")
            if last and avx:
                body += [
                    f"        lg.v[{ox}][{j}] = {P}_logit8({accs[t][j]}, {P}_m{i}[{ox}], {P}_s{i}[{ox}]);"
                    for t, ox in enumerate(outs)
                    for j in range(4)
                ]
            elif last:
                for t, ox in enumerate(outs):
                    body += [f"        acc.v[{j}] = {accs[t][j]};" for j in range(4)]
                    body.append(
                        f"        for (b = 0; b < {blocks}; ++b) lg[b][{ox}] = "
                        f"{P}_logit_requant(acc.s[b], {P}_m{i}[{ox}], {P}_s{i}[{ox}]);"
                    )
            else:
                for t, ox in enumerate(outs):
                    r = ("r0", "r1") if t == 0 else ("t0", "t1")
                    body += [f"        {accs[t][j]} >>= {P}_s{i}[{ox}];" for j in range(4)]
                    body += [
                        f"        {r[h]} = {bi('packssdw')}({accs[t][2 * h]}, {accs[t][2 * h + 1]});" for h in (0, 1)
                    ]
                    body += [
                        f"        {r[h]} = {bi('pminsw')}({bi('pmaxsw')}({bi('pmulhw')}({r[h]}, zs + (short){P}_m{i}[{ox}]), zs), top);"
                        for h in (0, 1)
                    ]
                odd = ("t0", "t1") if len(outs) == 2 else ("zs", "zs")
                body += [
                    f"        {dst}[o >> 1][{2 * h + u}] = {bi('punpck' + ('l' if u == 0 else 'h') + 'wd')}(r{h}, {odd[h]});"
                    for h in (0, 1)
                    for u in (0, 1)
                ]
            body.append("    }")
        src, dst = dst, src
    if avx:
        body += [
            "    for (k = 0; k < 4; ++k) {               /* strictly greater: the first largest wins */",
            "        topv = lg.v[0][k];",
            "        best.v[k] = zi;",
            f"        for (c = 1; c < {C}; ++c) {{",
            "            gt = lg.v[c][k] > topv;",
            "            best.v[k] = (gt & (zi + c)) | (~gt & best.v[k]);",
            "            topv = (gt & lg.v[c][k]) | (~gt & topv);",
            "        }",
            "    }",
            "    for (b = 0; b < nb; ++b) {",
            f"        classes[b] = best.s[b / {lanes}][b % {lanes}];",
            f"        if (logits) for (c = 0; c < {C}; ++c) logits[(int64_t)b * {C} + c] = lg.s[c][b / {lanes}][b % {lanes}];",
            "    }",
        ]
    else:
        body += _tile_argmax(U)
    what = "every x86-64 CPU" if not avx else "chosen at run time"
    return (
        f"""
/* {isa.upper()} pass ({what}): up to {blocks} blocks (nb of them) */
static inline {I["target"]}void {P}_predict_{isa}(const int64_t *features, int32_t nb, int32_t *classes, int32_t *logits)
{{
"""
        + "\n".join(body)
        + "\n}\n"
    )


def _mlp_tile(q, P: str) -> str:
    """The batch path: tiles of ``P_TILE`` blocks, computed lane by lane with constant trip
    counts and paired int16 activations (``[k][block][2]``), so compilers vectorise the dot
    products (``pmaddwd``-style) and the unsigned requantisation; bit-identical to the
    single-block path."""
    U = P.upper()
    pairs = [(L.w.shape[1] + 1) // 2 for L in q.layers]
    width = max([pairs[0]] + [(L.w.shape[0] + 1) // 2 for L in q.layers[:-1]])
    arrays = []
    for i, L in enumerate(q.layers):
        n_out, n_in = L.w.shape
        wp = np.zeros((n_out, pairs[i], 2), np.int64)
        wp.reshape(n_out, -1)[:, :n_in] = L.w
        arrays.append(c_array(f"{P}_wp{i}", "int8_t", wp.reshape(n_out, -1)))
        if int(L.mul.max()) >= 1 << 32:
            raise ExportError("requantisation multipliers must fit 32 bits")
    body = [
        f"    int16_t xa[{width}][{U}_TILE][2], xb[{width}][{U}_TILE][2];",
        f"    int32_t acc[{U}_TILE], lg[{U}_TILE][{U}_N_CLASSES], codes[{U}_N_FEATURES];",
        "    int32_t b, k, o, c, best;",
        f"    for (k = 0; k < {width}; ++k) for (b = 0; b < {U}_TILE; ++b) {{ xa[k][b][0] = 0; xa[k][b][1] = 0; }}",
        "    for (b = 0; b < nb; ++b) {",
        f"        {P}_quantize_inputs(features + (int64_t)b * {U}_N_FEATURES, codes);",
        f"        for (k = 0; k < {U}_N_FEATURES; ++k) xa[k >> 1][b][k & 1] = (int16_t)codes[k];",
        "    }",
    ]
    src, dst = "xa", "xb"
    for i, L in enumerate(q.layers):
        n_out, n_in = L.w.shape
        last = i == len(q.layers) - 1
        body += [
            f"    /* layer {i}: {n_in} -> {n_out} */",
            f"    for (o = 0; o < {n_out}; ++o) {{",
            f"        const int32_t bias = {P}_b{i}[o];",
            f"        const uint32_t m = {P}_m{i}[o];",
            f"        const int32_t s = {P}_s{i}[o];",
            f"        for (b = 0; b < {U}_TILE; ++b) acc[b] = bias;",
            f"        for (k = 0; k < {pairs[i]}; ++k) {{",
            f"            const int32_t w0 = {P}_wp{i}[o][2 * k], w1 = {P}_wp{i}[o][2 * k + 1];",
            f"            for (b = 0; b < {U}_TILE; ++b) acc[b] += w0 * {src}[k][b][0] + w1 * {src}[k][b][1];",
            "        }",
        ]
        if last:
            body.append(f"        for (b = 0; b < {U}_TILE; ++b) lg[b][o] = {P}_logit_requant(acc[b], m, s);")
        else:
            if n_out % 2:
                body.append(f"        if (o == {n_out - 1}) for (b = 0; b < {U}_TILE; ++b) {dst}[o >> 1][b][1] = 0;")
            body.append(
                f"        for (b = 0; b < {U}_TILE; ++b) {dst}[o >> 1][b][o & 1] = {P}_hidden_requant(acc[b], (int32_t)m, s);"
            )
        body.append("    }")
        src, dst = dst, src
    body += _tile_argmax(U)
    return (
        "\n"
        + "".join(arrays)
        + f"""
#ifndef {U}_TILE
#define {U}_TILE 32  /* blocks per tile of the batch path (stack: about {4 * width * 2} x TILE bytes) */
#endif

/* up to {U}_TILE blocks (nb of them) at once */
static inline void {P}_predict_tile(const int64_t *features, int32_t nb, int32_t *classes, int32_t *logits)
{{
"""
        + "\n".join(body)
        + f"""
}}

/* Batch path: the AVX2 or SSE2 pass on x86-64 with GCC; elsewhere tiles where the target has widening
 * SIMD multiplies (SSE4.1/AVX2/NEON), else block by block. All are bit-identical; define
 * {U}_NO_SIMD, and {U}_BATCH_TILES to 0 or 1, to choose. */
#ifndef {U}_BATCH_TILES
#if defined(__SSE4_1__) || defined(__AVX2__) || defined(__ARM_NEON) || defined(__aarch64__)
#define {U}_BATCH_TILES 1
#else
#define {U}_BATCH_TILES 0
#endif
#endif

#if {U}_AVX2
/* the AVX2 pass: always when the build targets AVX2, else if cpuid says so (asked once) */
static inline int {P}_use_avx2(void)
{{
#if {U}_AVX2 == 2
    return 1;
#else
    static int has = -1;
    if (has < 0) has = {P}_cpu_has_avx2();
    return has;
#endif
}}
#endif

/* n blocks: features [n][{U}_N_FEATURES] -> classes [n]; logits [n][{U}_N_CLASSES] if not 0 */
static inline void {P}_predict_batch(const int64_t *features, int32_t n, int32_t *classes, int32_t *logits)
{{
    int32_t r;
#if {U}_SIMD
#if {U}_AVX2
    if ({P}_use_avx2()) {{
        for (r = 0; r < n; r += 32) {{
            const int32_t nb = (n - r < 32) ? n - r : 32;
            {P}_predict_avx2(features + (int64_t)r * {U}_N_FEATURES, nb, classes + r,
                             logits ? logits + (int64_t)r * {U}_N_CLASSES : 0);
        }}
        return;
    }}
#endif
    for (r = 0; r < n; r += 16) {{
        const int32_t nb = (n - r < 16) ? n - r : 16;
        {P}_predict_sse2(features + (int64_t)r * {U}_N_FEATURES, nb, classes + r,
                         logits ? logits + (int64_t)r * {U}_N_CLASSES : 0);
    }}
#elif {U}_BATCH_TILES
    for (r = 0; r < n; r += {U}_TILE) {{
        const int32_t nb = (n - r < {U}_TILE) ? n - r : {U}_TILE;
        {P}_predict_tile(features + (int64_t)r * {U}_N_FEATURES, nb, classes + r,
                         logits ? logits + (int64_t)r * {U}_N_CLASSES : 0);
    }}
#else
    for (r = 0; r < n; ++r)
        classes[r] = {P}_predict_one(features + (int64_t)r * {U}_N_FEATURES,
                                     logits ? logits + (int64_t)r * {U}_N_CLASSES : 0);
#endif
}}
"""
    )
