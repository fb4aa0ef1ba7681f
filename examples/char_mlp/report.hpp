// examples/char_mlp/report.hpp — what a run shows: losses, samples, neighbours, logs, plots.
#pragma once

#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "data.hpp"
#include "model.hpp"

namespace char_mlp {

// Mean cross-entropy (nats) of the model over every example, without building a graph.
double evaluate(const CharMLP& model, const Examples& data);

// Samples one word: start from '.'·block, draw the next id from softmax(logits), stop at '.'.
std::string sample_word(const CharMLP& model, int block, std::mt19937_64& rng);

// For each letter in `letters`, its `k` nearest letters by cosine similarity of their rows
// in the embedding table; then the mean cosine among the vowels a e i o u against the mean
// cosine between a vowel and a consonant.
void print_neighbours(const CharMLP& model, const std::string& letters, int k);

// loss.csv: "step,train_loss,val_loss,lr" (val_loss empty between evaluations).
class LossLog {
public:
    LossLog(const std::string& path, bool append);
    void write(int step, double train_loss, double val_loss /* NaN = none */, double lr);

private:
    std::ofstream out_;
};

// Draws loss.csv into loss.png with gnuplot when it is installed; returns the note to print.
// `title` and the y range (gnuplot syntax, in nats) default to char_mlp's.
std::string plot_losses(const std::string& out_dir, const std::string& title = "char_mlp: cross-entropy loss (nats)",
                        const std::string& yrange = "[1.5:3.5]");

// One status line: in place ('\r') on a terminal, plain lines otherwise.
class Progress {
public:
    Progress(int first_step, int total_steps);
    void update(int step, double loss, double lr, double val_loss /* NaN = none */);
    void finish();

private:
    int first_, total_;
    bool tty_;
    double start_, last_val_ = -1;
};

double now_seconds();

}  // namespace char_mlp
