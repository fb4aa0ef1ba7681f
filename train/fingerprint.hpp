// train/fingerprint.hpp — what a model's token ids mean, recorded beside its weights so that a
// resume on another text, vocabulary or tokenizer is refused: token id 5 must keep the character
// the weights learnt for it (nanoGPT keeps the same in meta.pkl).
//
//   metadata  "data.vocab_hex"     the vocabulary, byte i as two lowercase hex digits: id i
//             "data.text_bytes"    the training text's length in bytes (decimal)
//             "data.text_fnv1a64"  its 64-bit FNV-1a hash (io::fnv1a64), 16 lowercase hex digits
//             "data.tokenizer"     only when set: what gives the ids above the bytes their meaning
#pragma once

#include <cstdint>
#include <string>

#include <xgrad/nn/serialize.hpp>

namespace xgrad::train {

// The data a model was trained on, as far as its ids are concerned.
struct TextFingerprint {
    std::string vocab;             // (V,) bytes: id i is the byte vocab[i]; any of 0x00-0xff
    std::uint64_t text_bytes = 0;  // the length of the training text
    std::uint64_t text_fnv1a = 0;  // its 64-bit FNV-1a hash (io::fnv1a64)
    std::string tokenizer;         // "": one byte per token; else e.g. a byte-pair tokenizer's
                                   // merges as a hash (examples/gpt/tokens.hpp)
};
TextFingerprint fingerprint(const std::string& vocab, const std::string& text);

// The fingerprint as the metadata above, for a training state and for a model file that needs its
// vocabulary to be sampled from.
nn::Metadata fingerprint_metadata(const TextFingerprint& data);

// The vocabulary a file records (its "data.vocab_hex" as bytes: id i is byte i), for a program
// that samples from saved weights. Throws std::runtime_error naming `path` when the key is missing
// or is not two lowercase hex digits per byte.
std::string saved_vocabulary(const std::string& path, const nn::Metadata& saved);

// Throws std::runtime_error (naming `path`) unless `saved` (a file's metadata) records the
// fingerprint `now`:
//   "records no vocabulary"   a data.* key missing: the ids cannot be checked
//   "vocabulary mismatch"     naming both sizes and the first id whose byte differs
//   "text mismatch"           (resume only) both lengths and hashes
//   "tokenizer mismatch"      naming both tokenizers ("one byte per token" for "")
// `resume`: a run that continues the saved one (the text must be the same too); else a new run
// that starts from the saved weights (the vocabulary and tokenizer only). Each message ends with
// the advice for that case.
void check_same_data(const std::string& path, const nn::Metadata& saved, const TextFingerprint& now, bool resume);

}  // namespace xgrad::train
