"""The ZNS harness's per-block I/O path (dogi_ml/zns): CRC32C (SSE4.2 three-chain path and the
slicing-by-8 fallback) against RFC 3720's values and a bitwise Python reference, and the bytes of
every written block (header, CRC32C, splitmix64 payload) against a Python re-derivation, equal
with the SIMD and the scalar kernels; the -DZNS_PROF build's per-write profile adds up."""

from __future__ import annotations

import json
import os
import random
import struct
import subprocess
from pathlib import Path

import numpy as np
import pytest

from dogi_ml.traces.binfmt import write_trace
from dogi_ml.traces.generators import generate
from dogi_ml.zns import harness as zh

# the harness is C: without a compiler every test here skips (fails under CI=true)
pytestmark = pytest.mark.usefixtures("c_compiler")

M64 = (1 << 64) - 1
BLK = 4096


def crc32c_ref(data: bytes, crc: int = 0) -> int:
    """CRC32C bit by bit (reflected polynomial 0x82F63B78), the definition itself."""
    crc ^= 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
    return crc ^ 0xFFFFFFFF


def payload_ref(lba: int, seq: int) -> bytes:
    """zns_replay.c's payload: splitmix64 from the state lba * K ^ seq, 508 words."""
    x = (lba * 0xD6E8FEB86659FD93 & M64) ^ seq
    out = []
    for _ in range((BLK - 32) // 8):
        x = (x + 0x9E3779B97F4A7C15) & M64
        z = x
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
        out.append(z ^ (z >> 31))
    return struct.pack("<508Q", *out)


CRC_DRIVER = r"""
#include <stdio.h>
#include <stdlib.h>
#include "crc32c.h"
/* argv: file seed then (offset length) pairs; prints "dispatched sw" per pair, and whether the
 * dispatched path is the hardware one */
int main(int argc, char **argv)
{
    FILE *f = fopen(argv[1], "rb");
    static unsigned char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    uint32_t seed = (uint32_t)strtoul(argv[2], 0, 0);
    printf("hw %d\n", crc32c_uses_hw());
    for (int i = 3; i + 1 < argc; i += 2) {
        size_t off = strtoul(argv[i], 0, 0), len = strtoul(argv[i + 1], 0, 0);
        if (off + len > n)
            return 1;
        printf("%08x %08x\n", crc32c(seed, buf + off, len), crc32c_sw(seed, buf + off, len));
    }
    return 0;
}
"""


@pytest.fixture(scope="module")
def crc_driver(tmp_path_factory):
    d = tmp_path_factory.mktemp("crc")
    (d / "t.c").write_text(CRC_DRIVER)
    exe = d / "t"
    cmd = [zh.find_cc(), *zh.CFLAGS, f"-I{zh.source_dir()}", str(d / "t.c"), "-o", str(exe)]
    subprocess.run(cmd, check=True, capture_output=True)
    return exe


def _crcs(exe: Path, tmp_path: Path, data: bytes, pairs, seed: int = 0):
    f = tmp_path / "buf.bin"
    f.write_bytes(data)
    args = [str(exe), str(f), str(seed), *[str(x) for p in pairs for x in p]]
    lines = subprocess.run(args, check=True, capture_output=True, text=True).stdout.split("\n")
    hw = lines[0] == "hw 1"
    return hw, [tuple(int(x, 16) for x in ln.split()) for ln in lines[1:] if ln]


def test_crc32c_rfc3720_check_values(crc_driver, tmp_path):
    # RFC 3720 B.4: 32 bytes of 0x00, of 0xFF, ascending, descending; the catalogue's "123456789"
    cases = [
        (bytes(32), 0x8A9136AA),
        (b"\xff" * 32, 0x62A8AB43),
        (bytes(range(32)), 0x46DD794E),
        (bytes(range(31, -1, -1)), 0x113FDB5C),
        (b"123456789", 0xE3069283),
    ]
    data = b"".join(c for c, _ in cases)
    pairs, at = [], 0
    for c, _ in cases:
        pairs.append((at, len(c)))
        at += len(c)
    _, got = _crcs(crc_driver, tmp_path, data, pairs)
    for (c, want), (dispatched, sw) in zip(cases, got, strict=True):
        assert crc32c_ref(c) == want
        assert dispatched == sw == want, (c[:9], hex(dispatched), hex(sw), hex(want))


def test_crc32c_paths_agree_on_random_buffers(crc_driver, tmp_path):
    """Random offsets (unaligned) and lengths, across the three-chain round (3 x 1360 bytes) and
    its tails, with a chained seed: the dispatched path, slicing-by-8 and the bitwise definition."""
    rng = random.Random(7)
    data = bytes(rng.getrandbits(8) for _ in range(20000))
    lengths = [0, 1, 7, 8, 9, 4080, 4088, 4095, 4096, 8160, 3 * 1360 - 1, 3 * 1360 + 7, 12 * 1360 + 3]
    lengths += [rng.randrange(0, 12000) for _ in range(12)]
    pairs = [(rng.randrange(0, 64), n) for n in lengths]
    seed = 0x12345678
    hw, got = _crcs(crc_driver, tmp_path, data, pairs, seed=seed)
    for (off, n), (dispatched, sw) in zip(pairs, got, strict=True):
        want = crc32c_ref(data[off : off + n], seed)
        assert dispatched == sw == want, (off, n)
    if not hw:
        pytest.skip("no SSE4.2 on this CPU: only the slicing-by-8 path was checked")


@pytest.fixture(scope="module")
def small_trace(tmp_path_factory):
    t = generate("zipf", capacity_blocks=512, n_writes=1536, seed=5, theta=1.0)
    return write_trace(t, tmp_path_factory.mktemp("trace") / "z.dtr")


def _replay(exe, trace, dev: Path, env=None, extra=()):
    args = zh.harness_args(
        trace, f"file:{dev}", capacity=512, policy="sepbit", op_ratio=1.0, create=(48, 64, 32, 14, 14)
    )
    proc = subprocess.run([str(exe), *args, *extra], capture_output=True, text=True, env={**os.environ, **(env or {})})
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.splitlines()[-1])


def _untagged(image: bytes) -> bytes:
    """A device image with every harness block's run tag and CRC32C zeroed."""
    blocks = np.frombuffer(image, dtype=np.uint8).reshape(-1, BLK).copy()
    ours = blocks[:, :4].copy().view("<u4")[:, 0] == 0x315A4244
    blocks[ours, 4:8] = 0
    blocks[ours, 30:32] = 0
    return blocks.tobytes()


def test_written_blocks_match_the_reference_and_both_kernels(small_trace, tmp_path):
    """Every block on the device: header (magic, LBA, sequence), CRC32C of bytes [8, 4096) and the
    payload equal the Python re-derivation; the SIMD and the scalar kernels write the same bytes."""
    exe = zh.build()
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    ra = _replay(exe, small_trace, tmp_path / "a" / "dev")
    rb = _replay(exe, small_trace, tmp_path / "b" / "dev", env={"DOGI_ZNS_SCALAR": "1"})
    assert ra["verify"]["ok"] and rb["verify"]["ok"] and ra["gc_writes"] > 0
    a = (tmp_path / "a" / "dev").read_bytes()
    # the same bytes but for the runs' tags (reserved word, bits 48-63, under the CRC32C)
    assert _untagged(a) == _untagged((tmp_path / "b" / "dev").read_bytes())
    blocks = np.frombuffer(a, dtype=np.uint8).reshape(-1, BLK)
    written = [i for i in range(len(blocks)) if blocks[i, :4].tobytes() == struct.pack("<I", 0x315A4244)]
    assert len(written) >= 512  # every live LBA at least (stale versions of reset zones are punched)
    rng = random.Random(1)
    tags = set()
    for i in rng.sample(written, 24):
        b = blocks[i].tobytes()
        magic, crc, lba, seq, reserved = struct.unpack_from("<IIQQQ", b)
        assert lba < 512 and 1 <= seq <= 512 + 1536
        # the reserved word: the run's tag above the journal's count of acknowledged writes at the
        # write's issue (below its own sequence number)
        tags.add(reserved >> 48)
        assert reserved & ((1 << 48) - 1) < seq
        assert crc == crc32c_ref(b[8:])
        assert b[32:] == payload_ref(lba, seq)
    assert len(tags) == 1 and tags != {0}


def test_profile_build_accounts_for_the_write_loop(small_trace, tmp_path):
    """-DZNS_PROF: microseconds per user write by component; the parts fit inside the loop and
    the system calls inside the user and GC writes."""
    src = zh.source_dir()
    exe = tmp_path / "zns_prof"
    cmd = [
        zh.find_cc(),
        *zh.CFLAGS,
        "-DZNS_PROF",
        str(src / "zns_replay.c"),
        str(src / "zdev.c"),
        "-lm",
        "-o",
        str(exe),
    ]
    subprocess.run(cmd, check=True, capture_output=True)
    r = _replay(exe, small_trace, tmp_path / "dev")
    p = r["profile_us_per_user_write"]
    parts = sum(p[k] for k in ("mapping", "payload", "crc", "device_write", "gc", "progress"))
    assert 0 < parts <= p["loop"] * 1.001
    assert 0 < p["pwrite"] <= p["device_write"] + p["gc"] and p["payload"] > 0 and p["crc"] > 0
    assert p["pwrite_blocks"] == r["device_write_blocks"] == r["user_writes"] + r["gc_writes"]
