// text/train.cpp — the lesson's trainer and the fast one, which learn the same merges.
#include "train.hpp"

#include <algorithm>
#include <limits>
#include <queue>
#include <stdexcept>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>

#include <xgrad/io/error.hpp>

namespace xgrad::text {

namespace {

using Id = std::int32_t;  // IDs while training: < 2^31 (checked), half the memory of TokenId
using Key = std::uint64_t;

constexpr Key key(Id left, Id right) { return (Key(std::uint32_t(left)) << 32) | std::uint32_t(right); }
constexpr Pair pair_of(Key k) { return {TokenId(k >> 32), TokenId(k & 0xFFFFFFFFu)}; }

std::int64_t merges_to_learn(std::int64_t vocab_size) {
    if (vocab_size < 256 || vocab_size > std::numeric_limits<Id>::max())
        throw ValueError(fmt::format("train: vocab_size {} must be in [256, 2^31 − 1]: the 256 byte tokens "
                                                "come first, then one token per merge",
                                                vocab_size));
    return vocab_size - 256;
}

[[noreturn]] void out_of_pairs(std::int64_t learned, std::int64_t wanted) {
    throw ValueError(fmt::format("train: the text allows only {} merges (every chunk is one token by then), "
                                            "so vocab_size is at most {} on it, but vocab_size {} needs {}; give a "
                                            "longer text or a smaller vocab_size",
                                            learned, 256 + learned, 256 + wanted, wanted));
}

std::vector<Id> byte_ids(std::string_view chunk) {
    std::vector<Id> ids(chunk.size());
    for (std::size_t i = 0; i < chunk.size(); ++i) ids[i] = static_cast<unsigned char>(chunk[i]);
    return ids;
}

// Replaces every (left, right) in `ids` by `id`, left to right, in place; minbpe's merge().
void merge(std::vector<Id>& ids, Id left, Id right, Id id) {
    std::size_t out = 0;
    for (std::size_t i = 0; i < ids.size(); ++out) {
        if (i + 1 < ids.size() && ids[i] == left && ids[i + 1] == right) {
            ids[out] = id;
            i += 2;
        } else {
            ids[out] = ids[i++];
        }
    }
    ids.resize(out);
}

}  // namespace

// ---- the lesson -------------------------------------------------------------------------------
std::vector<LearnedMerge> train_lesson(std::string_view text, std::int64_t vocab_size, const Splitter& split,
                                       const MergeCallback& on_merge) {
    const std::int64_t n_merges = merges_to_learn(vocab_size);
    std::vector<std::vector<Id>> chunks;  // every chunk of the text, in order, as byte IDs
    for (std::string_view chunk : split.split(text)) chunks.push_back(byte_ids(chunk));

    std::vector<LearnedMerge> merges;
    for (std::int64_t i = 0; i < n_merges; ++i) {
        // Count every adjacent pair, remembering the order in which pairs are first seen.
        std::unordered_map<Key, std::int64_t> counts;
        std::vector<Key> first_seen;
        for (const auto& ids : chunks)
            for (std::size_t j = 0; j + 1 < ids.size(); ++j) {
                const auto [it, is_new] = counts.try_emplace(key(ids[j], ids[j + 1]), 0);
                if (is_new) first_seen.push_back(it->first);
                ++it->second;
            }
        if (first_seen.empty()) out_of_pairs(i, n_merges);
        // The most frequent pair; a strictly greater count is needed to pass one seen earlier.
        Key best = first_seen.front();
        for (Key k : first_seen)
            if (counts[k] > counts[best]) best = k;
        const Id id = Id(256 + i);
        const Pair p = pair_of(best);
        for (auto& ids : chunks) merge(ids, Id(p.left), Id(p.right), id);
        merges.push_back({p, counts[best]});
        if (on_merge) on_merge(i, merges.back());
    }
    return merges;
}

// ---- the fast way -----------------------------------------------------------------------------
namespace {

// A distinct chunk: its current IDs and how often it occurs in the text.
struct Word {
    std::vector<Id> ids;
    std::int64_t count = 0;
};

class PairCounts {
public:
    explicit PairCounts(std::vector<Word> words) : words_(std::move(words)) {
        for (std::size_t w = 0; w < words_.size(); ++w) add_pairs(Id(w), +1);
        for (const auto& [k, c] : counts_) queue_.push({c, k});
    }

    // The most frequent pair and its count; among equal counts, the one seen first in the text.
    // {0, 0} when no pair is left.
    std::pair<Key, std::int64_t> most_frequent() {
        drop_stale();
        if (queue_.empty()) return {0, 0};
        const std::int64_t top = queue_.top().first;
        std::vector<Key> tied;
        std::unordered_set<Key> is_tied;  // a pair may sit in the queue more than once
        while (!queue_.empty() && queue_.top().first == top) {
            const Key k = queue_.top().second;
            queue_.pop();
            if (current(k) == top && is_tied.insert(k).second) tied.push_back(k);
            drop_stale();
        }
        const Key best = tied.size() == 1 ? tied.front() : first_in_text(is_tied);
        for (Key k : tied)
            if (k != best) queue_.push({top, k});
        return {best, top};
    }

    // Replaces the pair by `id` in every word that holds it and updates the counts of the pairs
    // of those words only.
    void merge_pair(Key k, Id id) {
        std::vector<Id> holders = std::move(where_[k]);
        where_.erase(k);
        std::sort(holders.begin(), holders.end());
        holders.erase(std::unique(holders.begin(), holders.end()), holders.end());
        const Pair p = pair_of(k);
        changed_.clear();
        for (Id w : holders) merge_word(w, Id(p.left), Id(p.right), id);
        std::sort(changed_.begin(), changed_.end());
        changed_.erase(std::unique(changed_.begin(), changed_.end()), changed_.end());
        for (Key c : changed_) {
            const std::int64_t n = current(c);
            if (n > 0) queue_.push({n, c});
            else counts_.erase(c);
        }
    }

private:
    static constexpr std::size_t npos = std::size_t(-1);

    // Adds (sign +1) or removes (−1) the word's pairs, times its count; the word joins the
    // holders of the pairs it gains.
    void add_pairs(Id w, int sign) {
        const Word& word = words_[std::size_t(w)];
        for (std::size_t j = 0; j + 1 < word.ids.size(); ++j) add_pair(w, j, sign);
    }
    // The same for the pair at position j of word w.
    void add_pair(Id w, std::size_t j, int sign) {
        const Word& word = words_[std::size_t(w)];
        const Key k = key(word.ids[j], word.ids[j + 1]);
        counts_[k] += sign * word.count;
        changed_.push_back(k);
        if (sign > 0) {
            auto& holders = where_[k];
            if (holders.empty() || holders.back() != w) holders.push_back(w);
        }
    }

    // Merges (left, right) into id in word w, left to right as merge() does, and changes only the
    // counts of the pairs that touch a merged position: with old ids o and the merge at j, the
    // pairs at j − 1, j and j + 1 of o go; with the new token at m, the pairs at m − 1 and m of the
    // new ids come. Every other pair is the same pair before and after. A word that no longer
    // holds the pair (a stale holder) is left alone.
    void merge_word(Id w, Id left, Id right, Id id) {
        std::vector<Id>& ids = words_[std::size_t(w)].ids;
        std::vector<std::size_t> gone, made;  // old pair positions that go; new token positions
        std::vector<Id> merged;
        merged.reserve(ids.size());
        for (std::size_t i = 0; i < ids.size();) {
            if (i + 1 < ids.size() && ids[i] == left && ids[i + 1] == right) {
                for (std::size_t j = i == 0 ? 0 : i - 1; j <= i + 1 && j + 1 < ids.size(); ++j)
                    if (gone.empty() || gone.back() < j) gone.push_back(j);  // ascending, each once
                made.push_back(merged.size());
                merged.push_back(id);
                i += 2;
            } else {
                merged.push_back(ids[i++]);
            }
        }
        if (made.empty()) return;
        for (std::size_t j : gone) add_pair(w, j, -1);
        ids = std::move(merged);
        std::size_t last = npos;  // the new pair positions, ascending, each once
        for (std::size_t m : made)
            for (std::size_t j = m == 0 ? 0 : m - 1; j <= m && j + 1 < ids.size(); ++j)
                if (last == npos || last < j) add_pair(w, j, +1), last = j;
    }

    // Of the tied pairs, the one that occurs first in the text: the words that hold (or held) one
    // of them, in order, each read left to right up to the first tied pair. One read of the words
    // for all the tied pairs, not one per pair: a text of one long chunk (a line of Chinese, no
    // spaces) ties thousands of pairs in one word.
    Key first_in_text(const std::unordered_set<Key>& tied) const {
        std::vector<Id> holders;
        for (Key k : tied) holders.insert(holders.end(), where_.at(k).begin(), where_.at(k).end());
        std::sort(holders.begin(), holders.end());
        holders.erase(std::unique(holders.begin(), holders.end()), holders.end());
        for (Id w : holders) {
            const auto& ids = words_[std::size_t(w)].ids;
            for (std::size_t j = 0; j + 1 < ids.size(); ++j)
                if (const Key k = key(ids[j], ids[j + 1]); tied.count(k)) return k;
        }
        throw std::logic_error("train: a pair with a count above 0 is in no word");  // never: counts come from words
    }

    std::int64_t current(Key k) const {
        const auto it = counts_.find(k);
        return it == counts_.end() ? 0 : it->second;
    }
    // Queue entries whose count has changed since they were pushed are skipped (a newer entry
    // with the current count was pushed when it changed).
    void drop_stale() {
        while (!queue_.empty() && current(queue_.top().second) != queue_.top().first) queue_.pop();
    }

    std::vector<Word> words_;                            // (U,) in order of first occurrence
    std::unordered_map<Key, std::int64_t> counts_;       // pair → occurrences in the text
    std::unordered_map<Key, std::vector<Id>> where_;     // pair → words that hold (or held) it
    std::priority_queue<std::pair<std::int64_t, Key>> queue_;  // (count, pair), largest count on top
    std::vector<Key> changed_;                           // pairs whose count the last merge touched
};

}  // namespace

std::vector<LearnedMerge> train(std::string_view text, std::int64_t vocab_size, const Splitter& split,
                                const MergeCallback& on_merge) {
    const std::int64_t n_merges = merges_to_learn(vocab_size);
    // The distinct chunks, numbered in the order they first occur, with their counts.
    std::vector<Word> words;
    std::unordered_map<std::string_view, Id> index;
    for (std::string_view chunk : split.split(text)) {
        const auto [it, is_new] = index.try_emplace(chunk, Id(words.size()));
        if (is_new) words.push_back({byte_ids(chunk), 0});
        ++words[std::size_t(it->second)].count;
    }
    PairCounts pairs(std::move(words));
    std::vector<LearnedMerge> merges;
    for (std::int64_t i = 0; i < n_merges; ++i) {
        const auto [best, count] = pairs.most_frequent();
        if (count == 0) out_of_pairs(i, n_merges);
        pairs.merge_pair(best, Id(256 + i));
        merges.push_back({pair_of(best), count});
        if (on_merge) on_merge(i, merges.back());
    }
    return merges;
}

Tokenizer make_tokenizer(const std::vector<LearnedMerge>& merges, const Splitter& split) {
    std::vector<Pair> pairs;
    for (const LearnedMerge& m : merges) pairs.push_back(m.pair);
    return Tokenizer(std::move(pairs), split.pattern());
}

Tokenizer train_tokenizer(std::string_view text, std::int64_t vocab_size, const Splitter& split) {
    return make_tokenizer(train(text, vocab_size, split), split);
}

}  // namespace xgrad::text
