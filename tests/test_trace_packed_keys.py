"""The packed message-matching key sorts and compares exactly like the (src, dst, tag, comm) tuple."""
import numpy as np
import pytest

from scalgraph.trace import matching
from tracebuild import Builder


def _columns(rng, n, tag_hi):
    return [rng.integers(0, 5, n), rng.integers(-1, 5, n), rng.integers(-3, tag_hi, n), rng.integers(0, 3, n)]


def test_packed_key_orders_like_the_tuple():
    rng = np.random.default_rng(7)
    s, r = _columns(rng, 400, 4), _columns(rng, 300, 6)
    (ps,), (pr,) = matching._packed_keys(s, r)
    tuples = list(zip(*[np.concatenate((a, b)).tolist() for a, b in zip(s, r)]))
    packed = np.concatenate((ps, pr)).tolist()
    by_tuple = sorted(range(len(tuples)), key=lambda i: tuples[i])
    by_packed = sorted(range(len(packed)), key=lambda i: packed[i])
    assert [tuples[i] for i in by_tuple] == [tuples[i] for i in by_packed]
    assert all((tuples[i] == tuples[j]) == (packed[i] == packed[j])
               for i, j in rng.integers(0, len(tuples), (2000, 2)).tolist())


def test_packed_key_falls_back_when_ranges_overflow():
    rng = np.random.default_rng(8)
    s, r = _columns(rng, 50, 4), _columns(rng, 50, 4)
    s[2] = s[2] * (1 << 40)                    # tag span ~2^42; with the other spans > 2^62
    s[3] = s[3] * (1 << 20)
    ks, kr = matching._packed_keys(s, r)
    assert len(ks) == 4 and len(kr) == 4 and ks[2] is s[2]


def _random_messages(tags):
    rng = np.random.default_rng(3)
    b = Builder(3)
    for i in range(60):
        src, dst = rng.choice(3, 2, replace=False).tolist()
        tag = int(rng.choice(tags))
        b.send(src, 2 * i, 2 * i + 1, dst=dst, tag=tag).recv(dst, 2 * i, 2 * i + 1, src=src, tag=tag)
    b.send(0, 500, 501, dst=1, tag=int(tags[0]))              # one without a receive
    trace = b.build()
    flat = matching.flatten(trace)
    return flat, matching.match_regions(flat)


@pytest.mark.parametrize("tags", [[0, 1, 2], [-2**31, 0, 2**31 - 1]])
def test_message_matching_same_with_and_without_packing(monkeypatch, tags):
    flat, nest = _random_messages(tags)
    packed = matching.match_messages(flat, nest)
    monkeypatch.setattr(matching, "_packed_keys", lambda s, r: (s, r))
    plain = matching.match_messages(flat, nest)
    assert len(packed) == 60 and len(packed.unmatched_send) == 1
    for name in ("send_evt", "recv_evt", "send_op", "recv_op", "post_op", "unmatched_send", "unmatched_recv"):
        assert np.array_equal(getattr(packed, name), getattr(plain, name))
