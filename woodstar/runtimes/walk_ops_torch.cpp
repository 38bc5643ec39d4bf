/* The walk operators' CPU kernels (walk_ops.c) registered with Torch's dispatcher, so
 * that a TorchScript trace or a torch.compile program calls them with no Python in
 * between: woodstar::perfect_tree_walk and woodstar::node_tree_walk (defined in
 * lowering/trees/walk_op.py) get these kernels at their CPU key.
 *
 * The kernels themselves stay in walk_ops.c, loaded once by walk_ops.py: this library
 * receives their addresses (woodstar_walk_ops::bind), so both paths share one build and
 * one SIMD setting. The tables the kernels read besides the operators' arguments
 * (walk_tables.py) are built in Python when a backend prepares a model and handed over
 * with woodstar_walk_ops::set_tables, keyed by the operator's first table argument; a
 * call whose arguments are not those tensors any more (dropped, or changed in place)
 * walks without tables, which gives the same sums, only slower. */
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <c10/util/intrusive_ptr.h>
#include <torch/library.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

extern "C" {
#include "walk_ops.h"
}

namespace {

using WeakImpl = c10::weak_intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl>;

std::atomic<walk_entry> perfect_entry{nullptr};
std::atomic<walk_entry> node_entry{nullptr};
std::atomic<bool> use_depths{true};   // walk_ops.use_tables: A/B switches
std::atomic<bool> use_columns{true};
std::atomic<int64_t> table_hits{0};   // calls that found their tables (for tests)

struct Tables {
    std::vector<WeakImpl> sources;  // the operator's arguments they were built from
    std::vector<int64_t> versions;  // and those tensors' versions then
    std::vector<int64_t> settings;  // the operator's integer arguments
    std::vector<int32_t> depths;    // empty: none
    std::vector<int32_t> columns;
};

std::mutex registry_lock;
std::unordered_map<const c10::TensorImpl *, std::shared_ptr<const Tables>> registry;

/* The tables built from exactly these tensors, unchanged since, or null. */
std::shared_ptr<const Tables> find_tables(const std::vector<const at::Tensor *> &sources,
                                          const std::vector<int64_t> &settings)
{
    std::shared_ptr<const Tables> tables;
    {
        std::lock_guard<std::mutex> guard(registry_lock);
        auto found = registry.find(sources[0]->unsafeGetTensorImpl());
        if (found == registry.end()) return nullptr;
        tables = found->second;
    }
    if (tables->sources.size() != sources.size() || tables->settings != settings) return nullptr;
    for (size_t i = 0; i < sources.size(); ++i) {
        auto alive = tables->sources[i].lock();
        if (alive.get() != sources[i]->unsafeGetTensorImpl()
            || tables->versions[i] != static_cast<int64_t>(sources[i]->_version()))
            return nullptr;
    }
    ++table_hits;
    return tables;
}

std::string type_name(c10::ScalarType type)
{
    switch (type) {
    case at::kFloat: return "torch.float32";
    case at::kDouble: return "torch.float64";
    case at::kInt: return "torch.int32";
    case at::kLong: return "torch.int64";
    default: return std::string("torch.") + c10::toString(type);
    }
}

/* The messages of walk_ops.py's Python kernels. */
at::Tensor checked(const at::Tensor &tensor, c10::ScalarType type, const char *name)
{
    TORCH_CHECK_TYPE(tensor.scalar_type() == type && tensor.device().is_cpu(),
                     "tree-walk kernel: ", name, " must be a CPU ", type_name(type),
                     " tensor, got ", type_name(tensor.scalar_type()), " on ", tensor.device());
    return tensor.contiguous();
}

/* Fills in the input's fields, runs ``entry`` and returns the sums. */
at::Tensor run(walk_entry entry, walk_spec &spec, const at::Tensor &wide_in,
               const at::Tensor &thresholds_in, const at::Tensor &leaves_in)
{
    TORCH_CHECK(entry != nullptr, "tree-walk kernel: the C kernels are not bound");
    const auto type = wide_in.scalar_type();
    TORCH_CHECK_TYPE(type == at::kFloat || type == at::kDouble,
                     "tree-walk kernel: the input must be float32 or float64, got ",
                     type_name(type));
    const at::Tensor wide = checked(wide_in, type, "the input");
    const at::Tensor thresholds = checked(thresholds_in, type, "thresholds");
    const at::Tensor leaves = checked(leaves_in, at::kDouble, "the leaf table");
    at::Tensor out = at::empty({wide.size(0), leaves.size(1)}, wide.options().dtype(at::kDouble));
    if (wide.size(0) == 0) return out;
    spec.wide = wide.const_data_ptr();
    spec.n_cols = wide.size(1);
    spec.thresholds = thresholds.const_data_ptr();
    spec.leaves = leaves.const_data_ptr<double>();
    spec.width = leaves.size(1);
    entry(&spec, type == at::kDouble, wide.size(0), out.mutable_data_ptr<double>(),
          at::get_num_threads());
    return out;
}

at::Tensor perfect_tree_walk(const at::Tensor &wide, const at::Tensor &level_columns_in,
                             const at::Tensor &level_thresholds, const at::Tensor &leaf_table_in,
                             int64_t n_trees, int64_t depth)
{
    const at::Tensor columns = checked(level_columns_in, at::kInt, "level columns");
    const at::Tensor leaf_table = checked(leaf_table_in, at::kDouble, "the leaf table");
    auto tables = find_tables({&leaf_table_in}, {n_trees, depth});
    walk_spec spec = {};
    spec.columns = columns.const_data_ptr<int32_t>();
    spec.n_trees = n_trees;
    spec.steps = depth;
    if (tables && use_columns && !tables->columns.empty()) spec.tree_columns = tables->columns.data();
    return run(perfect_entry, spec, wide, level_thresholds, leaf_table);
}

at::Tensor node_tree_walk(const at::Tensor &wide, const at::Tensor &roots_in,
                          const at::Tensor &columns_in, const at::Tensor &thresholds,
                          const at::Tensor &rights_in, const at::Tensor &leaf_table_in,
                          int64_t steps)
{
    const at::Tensor roots = checked(roots_in, at::kLong, "roots");
    const at::Tensor columns = checked(columns_in, at::kInt, "columns");
    const at::Tensor rights = checked(rights_in, at::kInt, "rights");
    const at::Tensor leaf_table = checked(leaf_table_in, at::kDouble, "the leaf table");
    auto tables = find_tables({&roots_in, &rights_in, &leaf_table_in}, {});
    walk_spec spec = {};
    spec.columns = columns.const_data_ptr<int32_t>();
    spec.roots = roots.const_data_ptr<int64_t>();
    spec.rights = rights.const_data_ptr<int32_t>();
    spec.n_trees = roots.size(0);
    spec.steps = steps;
    if (tables && use_depths && !tables->depths.empty()) spec.depths = tables->depths.data();
    if (tables && use_columns && !tables->columns.empty()) spec.tree_columns = tables->columns.data();
    return run(node_entry, spec, wide, thresholds, leaf_table);
}

void bind(int64_t perfect, int64_t node, int64_t spec_size)
{
    TORCH_CHECK(spec_size == static_cast<int64_t>(sizeof(walk_spec)),
                "tree-walk kernel: the C structure differs between the two libraries");
    perfect_entry = reinterpret_cast<walk_entry>(perfect);
    node_entry = reinterpret_cast<walk_entry>(node);
}

std::vector<int32_t> int32_values(const c10::optional<at::Tensor> &table)
{
    if (!table.has_value()) return {};
    const at::Tensor values = checked(*table, at::kInt, "a table");
    const int32_t *data = values.const_data_ptr<int32_t>();
    return std::vector<int32_t>(data, data + values.numel());
}

void set_tables(at::TensorList sources, at::IntArrayRef settings,
                const c10::optional<at::Tensor> &depths, const c10::optional<at::Tensor> &columns)
{
    TORCH_CHECK(!sources.empty(), "tree-walk kernel: tables need their source tensors");
    auto tables = std::make_shared<Tables>();
    for (const at::Tensor &source : sources) {
        tables->sources.emplace_back(source.getIntrusivePtr());
        tables->versions.push_back(static_cast<int64_t>(source._version()));
    }
    tables->settings.assign(settings.begin(), settings.end());
    tables->depths = int32_values(depths);
    tables->columns = int32_values(columns);
    std::lock_guard<std::mutex> guard(registry_lock);
    for (auto entry = registry.begin(); entry != registry.end();)  // drop the dead ones
        entry = entry->second->sources[0].expired() ? registry.erase(entry) : std::next(entry);
    registry[sources[0].unsafeGetTensorImpl()] = std::move(tables);
}

void use_tables(bool depths, bool columns)
{
    use_depths = depths;
    use_columns = columns;
}

int64_t hits() { return table_hits.load(); }

}  // namespace

TORCH_LIBRARY(woodstar_walk_ops, m)
{
    m.def("bind(int perfect, int node, int spec_size) -> ()", &bind);
    m.def("set_tables(Tensor[] sources, int[] settings, Tensor? depths, Tensor? columns) -> ()",
          &set_tables);
    m.def("use_tables(bool depths, bool columns) -> ()", &use_tables);
    m.def("table_hits() -> int", &hits);
}

TORCH_LIBRARY_IMPL(woodstar, CPU, m)
{
    m.impl("perfect_tree_walk", &perfect_tree_walk);
    m.impl("node_tree_walk", &node_tree_walk);
}
