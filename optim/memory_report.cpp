// optim/memory_report.cpp — how many bytes each parameter, its gradient and its optimizer
// state occupy, counted exactly from what is stored right now.
//
// Per parameter of n elements (sizeof(real) = 4 in the float build), once stepped:
//   SGD                  0                      (momentum = 0)
//   SGD, momentum        b            n·4
//   Adam, AdamW          m, v         2·n·4, plus t: 8
//   ... with amsgrad     m, v, v_max  3·n·4, plus t: 8
// A row-sparse gradient of a (V, d) table holds k·(8 + d·4) bytes instead of V·d·4; the
// Adam state of that table stays dense (V·d each), as in PyTorch's SparseAdam. A frozen parameter
// (requires_grad off, as a LoRA base weight) gets no gradient, so 0 B of gradient and of state.
//
// Legend: V rows, d width, k rows present in a row-sparse gradient, n elements.
#include <algorithm>
#include <ostream>
#include <sstream>

#include <xgrad/optim/optimizer.hpp>

namespace xgrad::optim {

std::size_t MemoryRow::state_bytes() const {
    return exp_avg_bytes + exp_avg_sq_bytes + max_exp_avg_sq_bytes + momentum_buffer_bytes + step_bytes;
}

double MemoryRow::state_bytes_per_element() const {
    return numel == 0 ? 0.0 : static_cast<double>(state_bytes()) / static_cast<double>(numel);
}

namespace {
// The column sums of the rows `keep` accepts, named `name`.
template <class Keep>
MemoryRow column_sums(const std::vector<MemoryRow>& rows, const char* name, Keep keep) {
    MemoryRow t;
    t.name = name;
    for (const auto& r : rows) {
        if (!keep(r)) continue;
        t.numel += r.numel;
        t.rows += r.rows;
        t.param_bytes += r.param_bytes;
        t.grad_bytes += r.grad_bytes;
        t.exp_avg_bytes += r.exp_avg_bytes;
        t.exp_avg_sq_bytes += r.exp_avg_sq_bytes;
        t.max_exp_avg_sq_bytes += r.max_exp_avg_sq_bytes;
        t.momentum_buffer_bytes += r.momentum_buffer_bytes;
        t.step_bytes += r.step_bytes;
        t.rows_touched += r.rows_touched;
        t.state_bytes_all_ranks += r.state_bytes_all_ranks;
    }
    return t;
}
}  // namespace

MemoryRow MemoryReport::total() const {
    return column_sums(rows, "total", [](const MemoryRow&) { return true; });
}
MemoryRow MemoryReport::total_trainable() const {
    return column_sums(rows, "total trainable", [](const MemoryRow& r) { return r.trainable; });
}
MemoryRow MemoryReport::total_frozen() const {
    return column_sums(rows, "total frozen", [](const MemoryRow& r) { return !r.trainable; });
}
bool MemoryReport::has_frozen() const {
    return std::any_of(rows.begin(), rows.end(), [](const MemoryRow& r) { return !r.trainable; });
}

MemoryReport Optimizer::memory_report() const {
    MemoryReport report;
    report.optimizer = kind_;
    report.state_columns = state_buffer_names();
    if (counts_steps()) report.state_columns.push_back("step");
    constexpr std::size_t elem = sizeof(real);
    for (const auto& group : groups_) {
        for (const auto& [name, p] : group.params) {
            const TensorImpl& t = *p.impl();
            MemoryRow row;
            row.name = name;
            row.shape = p.shape();
            row.numel = p.numel();
            row.rows = row.shape.empty() ? 1 : row.shape[0];
            row.trainable = p.requires_grad();
            row.param_bytes = row.numel * elem;
            if (t.sparse_grad) {
                row.grad_bytes = t.sparse_grad->nbytes();
            } else if (t.grad) {
                row.grad_bytes = t.grad->data.size() * elem;
            }
            auto it = state_.find(name);
            if (it != state_.end()) {
                const ParamState& st = it->second;
                if (st.initialized) {  // the buffers this optimizer keeps exist from here on
                    for (const auto& b : state_buffer_names()) {
                        const std::size_t bytes = st.buffer(b)->size() * elem;
                        if (b == "exp_avg") row.exp_avg_bytes = bytes;
                        if (b == "exp_avg_sq") row.exp_avg_sq_bytes = bytes;
                        if (b == "max_exp_avg_sq") row.max_exp_avg_sq_bytes = bytes;
                        if (b == "momentum_buffer") row.momentum_buffer_bytes = bytes;
                    }
                    row.step_bytes = counts_steps() ? sizeof(std::int64_t) : 0;
                }
                row.last_update = st.last_update;
                row.rows_touched = st.rows_touched;
            }
            report.rows.push_back(std::move(row));
        }
    }
    return report;
}

std::string human_bytes(std::size_t bytes) {
    const double b = static_cast<double>(bytes);
    if (bytes < 1024) return fmt::format("{} B", bytes);
    if (b < 1024.0 * 1024) return fmt::format("{:.2f} KiB", b / 1024);
    if (b < 1024.0 * 1024 * 1024) return fmt::format("{:.2f} MiB", b / (1024.0 * 1024));
    return fmt::format("{:.2f} GiB", b / (1024.0 * 1024 * 1024));
}

namespace {

std::size_t state_column(const MemoryRow& r, const std::string& column) {
    if (column == "exp_avg") return r.exp_avg_bytes;
    if (column == "exp_avg_sq") return r.exp_avg_sq_bytes;
    if (column == "max_exp_avg_sq") return r.max_exp_avg_sq_bytes;
    if (column == "momentum_buffer") return r.momentum_buffer_bytes;
    return r.step_bytes;  // "step"
}

const char* last_update_name(LastUpdate u) {
    switch (u) {
        case LastUpdate::dense: return "dense";
        case LastUpdate::sparse: return "sparse";
        default: return "-";
    }
}

using Line = std::vector<std::string>;

// The two header lines (name, unit) of the table's columns; "trainable" only when a row is frozen.
std::pair<Line, Line> column_heads(const MemoryReport& report) {
    Line names{"name", "shape"}, units{"", ""};
    if (report.has_frozen()) names.push_back("trainable"), units.push_back("");
    names.insert(names.end(), {"numel", "param", "grad"});
    units.insert(units.end(), {"elements", "B", "B"});
    for (const auto& c : report.state_columns) {
        names.push_back(c);
        units.push_back("B");
    }
    for (const char* c : {"state", "state", "state/elem", "last step", "rows touched"}) names.push_back(c);
    for (const char* u : {"B", "KiB/MiB", "B/element", "", "of rows"}) units.push_back(u);
    if (report.sharded) {  // distributed/zero.hpp: who keeps each parameter's state, and all ranks' bytes
        names.insert(names.end(), {"owner", "state, all ranks"});
        units.insert(units.end(), {"rank", "B"});
    }
    return {names, units};
}

double percent(std::size_t part, std::size_t whole) {
    return whole == 0 ? 0.0 : 100.0 * static_cast<double>(part) / static_cast<double>(whole);
}

// The summary under the table: every row's bytes; with a frozen row, what the trainable rows hold
// and what the frozen ones hold (no gradient, no state, unless stepped before being frozen: as in
// PyTorch, a tensor's state stays until the optimizer is rebuilt); the adapter file's bytes.
void write_summary(std::ostream& os, const MemoryReport& report) {
    const MemoryRow total = report.total();
    const double ratio = total.param_bytes == 0 ? 0.0
                                                : static_cast<double>(total.state_bytes()) /
                                                      static_cast<double>(total.param_bytes);
    os << fmt::format("parameters {}, gradients {}, optimizer state {} ({:.2f} x the parameter bytes)",
                      human_bytes(total.param_bytes), human_bytes(total.grad_bytes),
                      human_bytes(total.state_bytes()), ratio);
    if (report.sharded)
        os << fmt::format("; on all {} ranks {} (this rank's share {:.3f})", report.world_size,
                          human_bytes(total.state_bytes_all_ranks),
                          total.state_bytes_all_ranks == 0 ? 0.0
                                                           : static_cast<double>(total.state_bytes()) /
                                                                 static_cast<double>(total.state_bytes_all_ranks));
    if (report.has_frozen()) {
        const MemoryRow trainable = report.total_trainable(), frozen = report.total_frozen();
        os << fmt::format("\ntrainable {} of {} elements ({:.2f}%): parameters {}, gradients {}, optimizer state {}; "
                          "frozen {} elements: parameters {}, gradients {}, optimizer state {}",
                          trainable.numel, total.numel, percent(trainable.numel, total.numel),
                          human_bytes(trainable.param_bytes), human_bytes(trainable.grad_bytes),
                          human_bytes(trainable.state_bytes()), frozen.numel, human_bytes(frozen.param_bytes),
                          human_bytes(frozen.grad_bytes), human_bytes(frozen.state_bytes()));
    }
    if (report.adapter_file_bytes > 0)
        os << fmt::format("\nadapter file {} ({} B), {:.2f}% of the parameter bytes", human_bytes(report.adapter_file_bytes),
                          report.adapter_file_bytes, percent(report.adapter_file_bytes, total.param_bytes));
}

// The table of the `shown` rows (in that order), one line summing the rows left out (if any),
// then the total of every row and the summary line. Two header lines (name, unit); text columns
// left-aligned, numbers right-aligned, each as wide as its widest cell.
void write_table(std::ostream& os, const MemoryReport& report, const std::vector<const MemoryRow*>& shown) {
    const auto [names, units] = column_heads(report);
    const bool split = report.has_frozen();
    auto cells = [&](const MemoryRow& r, bool is_total) {
        Line line{r.name, is_total ? "" : shape_str(r.shape)};
        if (split) line.push_back(is_total ? "" : r.trainable ? "yes" : "no");
        line.insert(line.end(), {std::to_string(r.numel), std::to_string(r.param_bytes), std::to_string(r.grad_bytes)});
        for (const auto& c : report.state_columns) line.push_back(std::to_string(state_column(r, c)));
        line.push_back(std::to_string(r.state_bytes()));
        line.push_back(human_bytes(r.state_bytes()));
        line.push_back(fmt::format("{:.2f}", r.state_bytes_per_element()));
        line.push_back(is_total ? "" : last_update_name(r.last_update));
        line.push_back(fmt::format("{}/{}", r.rows_touched, r.rows));
        if (report.sharded) {
            line.push_back(is_total ? "" : std::to_string(r.owner));
            line.push_back(std::to_string(r.state_bytes_all_ranks));
        }
        return line;
    };
    std::vector<Line> body;
    for (const MemoryRow* r : shown) body.push_back(cells(*r, false));
    const MemoryRow total = report.total();
    std::vector<Line> total_lines;  // total trainable, total frozen (when a row is frozen), total
    if (split) {
        total_lines.push_back(cells(report.total_trainable(), true));
        total_lines.push_back(cells(report.total_frozen(), true));
    }
    total_lines.push_back(cells(total, true));

    std::vector<std::size_t> width(names.size(), 0);
    std::vector<const Line*> all{&names, &units};
    for (const auto& l : total_lines) all.push_back(&l);
    for (const auto& l : body) all.push_back(&l);
    for (const Line* l : all) {
        for (std::size_t i = 0; i < l->size(); ++i) width[i] = std::max(width[i], (*l)[i].size());
    }
    const std::size_t last_text_column = names.size() - (report.sharded ? 4 : 2);  // "last step"
    const std::size_t first_number_column = split ? 3 : 2;                         // "numel"
    auto print = [&](const Line& l) {
        std::string s;
        for (std::size_t i = 0; i < l.size(); ++i) {
            const bool left = i < first_number_column || i == last_text_column;  // text left, numbers right
            s += left ? fmt::format("{:<{}}", l[i], width[i]) : fmt::format("{:>{}}", l[i], width[i]);
            s += i + 1 < l.size() ? "  " : "";
        }
        s.erase(s.find_last_not_of(' ') + 1);
        os << s << "\n";
    };
    std::size_t rule = 0;
    for (std::size_t w : width) rule += w + 2;

    os << fmt::format("{} optimizer memory{}: {} parameter tensors, {} elements, sizeof(real) = {} B; "
                      "state is allocated at a parameter's first step()\n",
                      report.optimizer,
                      report.sharded ? fmt::format(" on rank {} of {} ({}; the state of the other ranks' parameters "
                                                   "is theirs)", report.rank, report.world_size, report.sharding)
                                     : std::string(),
                      report.rows.size(), total.numel, sizeof(real));
    print(names);
    print(units);
    os << std::string(rule - 2, '-') << "\n";
    for (const auto& l : body) print(l);
    if (shown.size() < report.rows.size()) {
        std::size_t params = 0, state = 0;
        for (const MemoryRow& r : report.rows) params += r.param_bytes, state += r.state_bytes();
        for (const MemoryRow* r : shown) params -= r->param_bytes, state -= r->state_bytes();
        os << fmt::format("... {} smaller tensors not shown: parameters {}, state {}\n",
                          report.rows.size() - shown.size(), human_bytes(params), human_bytes(state));
    }
    os << std::string(rule - 2, '-') << "\n";
    for (const auto& l : total_lines) print(l);
    write_summary(os, report);
}

}  // namespace

std::ostream& operator<<(std::ostream& os, const MemoryReport& report) {
    std::vector<const MemoryRow*> all;
    for (const MemoryRow& r : report.rows) all.push_back(&r);
    write_table(os, report, all);
    return os;
}

std::string memory_summary(const MemoryReport& report, std::size_t largest) {
    std::vector<const MemoryRow*> rows;
    for (const MemoryRow& r : report.rows) rows.push_back(&r);
    auto bytes = [](const MemoryRow* r) { return r->param_bytes + r->grad_bytes + r->state_bytes(); };
    std::stable_sort(rows.begin(), rows.end(),  // largest first; equal sizes in param_groups() order
                     [&](const MemoryRow* a, const MemoryRow* b) { return bytes(a) > bytes(b); });
    rows.resize(std::min(largest, rows.size()));
    std::ostringstream os;
    write_table(os, report, rows);
    return os.str();
}

}  // namespace xgrad::optim
