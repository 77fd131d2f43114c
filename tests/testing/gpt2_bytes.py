"""GPT-2's byte-to-character map (bytes_to_unicode), shared by the Python test helpers that build or
read byte-level vocabularies (tests/peers/tiktoken_native.py, tests/chaos/soak.py)."""


def bytes_to_unicode():
    """Each byte -> the printable character GPT-2's vocabulary writes it as."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}
