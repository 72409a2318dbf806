// Where an op's tensor arguments are when its entry probe fires: the
// integer argument register (x86-64 System V: rdi, rsi, rdx, rcx, r8, r9)
// of each tensor argument of at::_ops::<op>::call, from its demangled C++
// signature (the exact parameter types) and how the ABI passes each type.
// Used to read input shapes at op entry (--group-by-input-shapes).
#pragma once
#include <cstdint>
#include <string_view>
#include <vector>

namespace lt {

struct OpArgRegs {
  // One entry per schema argument, in order: 0..5 = the register holding a
  // tensor argument, -1 = not a tensor or not in a register (stack, or
  // unknown).  torch.profiler prints one shape per schema argument.
  std::vector<std::int8_t> tensor_reg;
  bool known = false;  // false: the schema could not be parsed at all
};

// signature: "at::_ops::addmm::call(at::Tensor const&, ..., c10::Scalar const&)";
// schema: the op's schema string, for its return type (a by-value return
// takes rdi as a hidden pointer), "" if unknown.
OpArgRegs tensor_arg_registers(std::string_view signature, std::string_view schema);

}  // namespace lt
