#!/usr/bin/python3
"""Reference values for text/ (tests/text/test_split.cpp, test_tokenizer.cpp, test_train.cpp):
a byte-level BPE tokenizer written the way karpathy/minbpe's RegexTokenizer works
(minbpe/regex.py and minbpe/base.py), short enough to check by eye.

Run at development time with Debian's python3 (it has the `regex` module) and the `bible`
program (package bible-kjv, .ci/install-deps):
    /usr/bin/python3 tests/reference/make_bpe_reference.py
It writes tests/reference/bpe_reference.json beside itself. The KJV excerpt is stored in the
JSON, so the tests need neither Python nor `bible`.

  excerpt     the first whole lines of `bible -f "gen1:1-rev22:21"` that fit in 12,000 bytes
  merges      the 256 merges (left, right, count) learned on the excerpt for vocab_size 512,
              GPT-4's split; merges_gpt2: 64 merges (vocab_size 320) with GPT-2's split
  split       texts and their chunks under GPT-2's and GPT-4's patterns (regex.findall)
  encodings   texts and their IDs with those merges (encode_ordinary); excerpt_ids: the
              excerpt's own IDs
  wikipedia   "aaabdaaabac": the 3 merges learned on it and its IDs
  llama       a text like minbpe's save/load test's: 64 merges learned on it (the special
              tokens' text is ordinary text to the trainer), its special tokens, and its IDs
              with allowed_special="all"

The algorithm, in four functions:
  train         split; each chunk a list of byte values; M rounds of: count adjacent pairs in
                every chunk (a dict, so the pairs keep the order in which they were first seen),
                take the largest count (the earliest-seen pair among equal counts), replace it by
                the next ID in every chunk, left to right
  encode_chunk  bytes; while some adjacent pair was learned, replace the one learned first
  encode        split at special tokens (when allowed), encode_chunk on every chunk of the rest
  decode        concatenate the bytes of the tokens
"""
import json
import os
import subprocess

import regex

# tiktoken's patterns, as minbpe/regex.py spells them.
GPT2_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
GPT4_PATTERN = r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+"""


def split(text, pattern):
    """The chunks of text: every non-overlapping match, left to right (Python's findall)."""
    return regex.findall(pattern, text)


def count_pairs(chunks):
    """{(left, right): count} over the adjacent pairs of every chunk; a pair never spans two
    chunks. Python's dict keeps insertion order: the pairs come in the order first seen."""
    counts = {}
    for ids in chunks:
        for pair in zip(ids, ids[1:]):
            counts[pair] = counts.get(pair, 0) + 1
    return counts


def replace_pair(ids, pair, new_id):
    """ids with every occurrence of pair, scanned left to right, replaced by new_id."""
    out, i = [], 0
    while i < len(ids):
        if i + 1 < len(ids) and (ids[i], ids[i + 1]) == pair:
            out.append(new_id)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


def train(text, vocab_size, pattern=GPT4_PATTERN):
    """[(left, right, count)]: the vocab_size - 256 merges, merge i making token 256 + i."""
    chunks = [list(c.encode("utf-8")) for c in split(text, pattern)]
    merges = []
    for new_id in range(256, vocab_size):
        counts = count_pairs(chunks)
        best = None
        for pair, n in counts.items():  # strictly greater: the earliest pair wins a tie
            if best is None or n > counts[best]:
                best = pair
        chunks = [replace_pair(ids, best, new_id) for ids in chunks]
        merges.append((best[0], best[1], counts[best]))
    return merges


def encode_chunk(data, ranks):
    """The IDs of one chunk's bytes; ranks maps a learned pair to its token ID."""
    ids = list(data)
    while len(ids) >= 2:
        learned = [p for p in zip(ids, ids[1:]) if p in ranks]
        if not learned:
            break
        first = min(learned, key=lambda p: ranks[p])  # the pair learned earliest
        ids = replace_pair(ids, first, ranks[first])
    return ids


def encode(text, merges, pattern=GPT4_PATTERN, specials=None):
    """The IDs of text; specials ({text: id}) are encoded as their IDs (allowed_special="all")."""
    ranks = {(l, r): 256 + i for i, (l, r, _) in enumerate(merges)}
    parts = [text]
    if specials:  # a capturing group keeps the special tokens between the parts
        parts = regex.split("(" + "|".join(regex.escape(s) for s in specials) + ")", text)
    ids = []
    for part in parts:
        if specials and part in specials:
            ids.append(specials[part])
            continue
        for chunk in split(part, pattern):
            ids.extend(encode_chunk(chunk.encode("utf-8"), ranks))
    return ids


def decode(ids, merges, specials=None):
    vocab = {i: bytes([i]) for i in range(256)}
    for i, (l, r, _) in enumerate(merges):
        vocab[256 + i] = vocab[l] + vocab[r]
    for s, i in (specials or {}).items():
        vocab[i] = s.encode("utf-8")
    return b"".join(vocab[i] for i in ids).decode("utf-8")


def kjv_excerpt(limit=12000):
    bible = subprocess.run(["bible", "-f", "gen1:1-rev22:21"], check=True, capture_output=True).stdout
    return bible[: bible.rindex(b"\n", 0, limit) + 1].decode("utf-8")


# minbpe's tests/test_tokenizer.py: its strings and its special tokens, with a text in the manner
# of its llama_text (paragraphs with IPA, digits, brackets and an en dash, the special tokens at the
# starts, inside and at the end), written here in other words.
MINBPE_STRINGS = ["", "?", "hello world!!!? (안녕하세요!) lol123 😉"]
LLAMA_SPECIALS = {"<|endoftext|>": 100257, "<|fim_prefix|>": 100258, "<|fim_middle|>": 100259,
                  "<|fim_suffix|>": 100260, "<|endofprompt|>": 100276}
LLAMA_TEXT = (
    "<|endoftext|>The llama (/ˈlɑːmə/; in Spanish [ˈʎama] or [ˈʝama]) is a camelid of the Andes, kept "
    "for its wool and as a pack animal since long before the Spanish came.\n"
    "A llama stands about 1.7 to 1.8 m tall at the head and weighs 130–200 kg; it carries 25 to 30% of "
    "its own weight for 8 to 13 km a day.[1] Llamas live in herds and learn simple tasks quickly.[2]\n"
    "<|endoftext|>Its wild ancestors lived on the plains of North America some 40 million years ago "
    "and reached South America about 3 million years ago.[3] In 2007 there were over 7 million llamas "
    "and alpacas in South America.\n"
    "<|fim_prefix|>In Aymara stories the llama drinks from the sea and gives the rain back;<|fim_suffix|>"
    " at the end of time.[4]<|fim_middle|> the llamas go back to the springs and lakes<|endofprompt|>")

# Texts to encode with the excerpt's merges: minbpe's, the excerpt's first verse, verses from far
# later in the Bible, contractions and digit runs, whitespace runs and line breaks.
ENCODE_TEXTS = MINBPE_STRINGS + [
    "In the beginning God created the heaven and the earth.",
    "John1:1 In the beginning was the Word, and the Word was with God, and the Word was God.\n"
    "Rev22:21 The grace of our Lord Jesus Christ be with you all. Amen.\n",
    "Psa23:1 The LORD is my shepherd; I shall not want.",
    "I'll pay 12345 shekels, don't",
    "WE'LL SEE; THEY'RE HERE'S 1234567 0.5 3,000",
    "   leading spaces, then  two,\tthen a tab\n\n\nthree line breaks  \r\n and CRLF   ",
    "\n",
    "        ",
    "x\n \n  y",
]

# Texts only for the split: the excerpt's opening verses, and characters where two regex engines
# could read the pattern differently (Unicode whitespace, numbers that are not digits, combining
# marks, the long s that (?i) folds to s, format and control characters). Left out, as the two
# engines differ there: U+180E MONGOLIAN VOWEL SEPARATOR, whitespace to PCRE2 (its \h) and not to
# `regex` (Unicode's White_Space), and the characters new in Unicode 15, which `regex` knows and
# PCRE2 10.42 (Unicode 14) does not.
SPLIT_TEXTS = ENCODE_TEXTS + [
    "'ſ 'S 'Ll 've 'RE 'x",
    "a\u00a0b\u2003c\u3000d x\u2028y\u2029z \u0085 end",
    "\x1c\x1d\x1e\x1f \x0b\x0c \x00\x01\x7f",
    "e\u0301t\u00e9 \u0915\u094d\u0937 \u0661\u0662\u0663\u0664 \u2167\u00bd\u00b2 12\u200d34",
    "\ufeffbom \u200bzero\u200cwidth\u00adsoft \U0001d400\U0001d7ce \u3007\u16ee",
    "tab\t\tend \t\n\t x",
]


def main():
    excerpt = kjv_excerpt()
    merges = train(excerpt, 512)
    split_texts = ["".join(excerpt.splitlines(keepends=True)[:12])] + SPLIT_TEXTS

    encodings = []
    for text in ENCODE_TEXTS:
        ids = encode(text, merges)
        assert decode(ids, merges) == text
        encodings.append({"text": text, "ids": ids})

    wiki_merges = train("aaabdaaabac", 256 + 3)
    llama_merges = train(LLAMA_TEXT, 256 + 64)
    llama_ids = encode(LLAMA_TEXT, llama_merges, specials=LLAMA_SPECIALS)
    assert decode(llama_ids, llama_merges, LLAMA_SPECIALS) == LLAMA_TEXT

    out = {
        "excerpt": excerpt,
        "vocab_size": 512,
        "merges": [list(m) for m in merges],
        "merges_gpt2": [list(m) for m in train(excerpt, 320, GPT2_PATTERN)],
        "split": [{"text": t, "gpt2": split(t, GPT2_PATTERN), "gpt4": split(t, GPT4_PATTERN)}
                  for t in split_texts],
        "encodings": encodings,
        "excerpt_ids": encode(excerpt, merges),
        "wikipedia": {"text": "aaabdaaabac", "merges": [list(m) for m in wiki_merges],
                      "ids": encode("aaabdaaabac", wiki_merges)},
        "llama": {"text": LLAMA_TEXT, "merges": [list(m) for m in llama_merges],
                  "specials": [[s, i] for s, i in LLAMA_SPECIALS.items()], "ids": llama_ids},
    }
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bpe_reference.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=None, separators=(",", ":"))
        f.write("\n")
    print(f"{path}: {len(excerpt)} bytes of KJV, {len(merges)} merges, "
          f"{len(split_texts)} split texts, {len(encodings)} encodings")


if __name__ == "__main__":
    main()
