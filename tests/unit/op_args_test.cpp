#include "user/torch/op_args.h"

#include <gtest/gtest.h>

#include <vector>

namespace {
std::vector<std::int8_t> regs(const char* signature, const char* schema) {
  auto r = lt::tensor_arg_registers(signature, schema);
  EXPECT_TRUE(r.known);
  return r.tensor_reg;
}
using V = std::vector<std::int8_t>;
}  // namespace

// Signatures as __cxa_demangle prints them for torch 2.15's libtorch_cpu.so.
TEST(OpArgs, TensorReturnedByValueTakesRdi) {
  EXPECT_EQ(regs("at::_ops::mm::call(at::Tensor const&, at::Tensor const&)", "mm(Tensor self, Tensor mat2) -> Tensor"),
            (V{1, 2}));
  EXPECT_EQ(regs("at::_ops::addmm::call(at::Tensor const&, at::Tensor const&, at::Tensor const&, c10::Scalar const&, "
                 "c10::Scalar const&)",
                 "addmm(Tensor self, Tensor mat1, Tensor mat2, *, Scalar beta=1, Scalar alpha=1) -> Tensor"),
            (V{1, 2, 3, -1, -1}));
  // optional bias, std:: (torch >= 2.2) and c10:: (older)
  EXPECT_EQ(regs("at::_ops::linear::call(at::Tensor const&, at::Tensor const&, std::optional<at::Tensor> const&)",
                 "linear(Tensor input, Tensor weight, Tensor? bias=None) -> Tensor"),
            (V{1, 2, 3}));
  EXPECT_EQ(regs("at::_ops::linear::call(at::Tensor const&, at::Tensor const&, c10::optional<at::Tensor> const&)", ""),
            (V{1, 2, 3}));
}

TEST(OpArgs, InPlaceReturnsAReference) {
  EXPECT_EQ(regs("at::_ops::add__Tensor::call(at::Tensor&, at::Tensor const&, c10::Scalar const&)",
                 "add_.Tensor(Tensor(a!) self, Tensor other, *, Scalar alpha=1) -> Tensor(a!)"),
            (V{0, 1, -1}));
  // no schema: the name tells (in-place ops end with '_')
  EXPECT_EQ(regs("at::_ops::mul_::call(at::Tensor&, at::Tensor const&)", ""), (V{0, 1}));
}

TEST(OpArgs, RegisterCountsPerType) {
  // ArrayRef: two registers; OptionalArrayRef: in memory; optional<long>: two
  EXPECT_EQ(regs("at::_ops::x::call(c10::ArrayRef<long>, at::Tensor const&, c10::OptionalArrayRef<long>, "
                 "at::Tensor const&, std::optional<long>, at::Tensor const&)",
                 ""),
            (V{-1, 3, -1, 4, -1, -1}));  // rdi sret, 1-2 list, 3 tensor, (memory), 4 tensor, 5-6 optional: stack
  // double goes in an SSE register; the tensor after it keeps the next integer register
  EXPECT_EQ(regs("at::_ops::y::call(at::Tensor const&, double, at::Tensor const&)", ""), (V{1, -1, 2}));
  // an unknown type: the registers after it are unknown
  EXPECT_EQ(regs("at::_ops::z::call(some::Thing, at::Tensor const&)", ""), (V{-1, -1}));
}

TEST(OpArgs, SchemaOfAnotherOpIsNotTrusted) {
  // A schema string whose argument count differs from the signature's
  // (another op sharing its tail) does not decide the return: the name does.
  EXPECT_EQ(regs("at::_ops::cos::call(at::Tensor const&)", "cos(Tensor[] self) -> Tensor[]"), (V{1}));
}
