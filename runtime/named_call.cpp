#include "named_call.hpp"

#include <algorithm>
#include "errors.hpp"

namespace attn::detail {

namespace {

std::string listed(const std::vector<std::string>& names) {
  std::string s;
  for (const std::string& n : names) s += (s.empty() ? "" : ", ") + n;
  return s;
}

}  // namespace

std::vector<tensor_view> in_call_order(const std::vector<std::string>& parameters, std::span<const named_tensor> named,
                                       std::string_view call) {
  const std::string who(call);
  std::vector<tensor_view> ordered(parameters.size());
  std::vector<bool> given(parameters.size(), false);
  for (const named_tensor& t : named) {
    const auto it = std::find(parameters.begin(), parameters.end(), t.name);
    if (it == parameters.end())
      throw argument_error(who + ": no tensor named '" + std::string(t.name) + "' (it takes " + listed(parameters) + ")");
    const auto i = static_cast<std::size_t>(it - parameters.begin());
    if (given[i]) throw argument_error(who + ": tensor '" + std::string(t.name) + "' given twice");
    given[i] = true;
    ordered[i] = t.tensor;
  }
  std::vector<std::string> missing;
  for (std::size_t i = 0; i < parameters.size(); ++i)
    if (!given[i]) missing.push_back(parameters[i]);
  if (!missing.empty()) throw argument_error(who + ": missing tensor(s) " + listed(missing));
  return ordered;
}

}  // namespace attn::detail
