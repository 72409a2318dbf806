#include "reports/aggregate/step_batches.h"

namespace lt {

namespace {

struct Known {
  std::string_view hook;
  BatchStage stage;
  BatchRole role;
};

constexpr Known kHooks[] = {
    // Fetching the batch ([_TrainingEpochLoop].train_dataloader_next, ...)
    // starts it: the step a torch.profiler user would draw includes it.
    {"train_dataloader_next", BatchStage::train, BatchRole::batch_start},
    {"val_next", BatchStage::validation, BatchRole::batch_start},
    {"test_next", BatchStage::test, BatchRole::batch_start},
    {"predict_next", BatchStage::predict, BatchRole::batch_start},
    {"on_train_batch_start", BatchStage::train, BatchRole::batch_start},
    {"run_training_batch", BatchStage::train, BatchRole::body},
    {"training_step", BatchStage::train, BatchRole::step},
    {"on_train_batch_end", BatchStage::train, BatchRole::batch_end},
    {"on_validation_batch_start", BatchStage::validation, BatchRole::batch_start},
    {"validation_step", BatchStage::validation, BatchRole::step},
    {"on_validation_batch_end", BatchStage::validation, BatchRole::batch_end},
    {"on_test_batch_start", BatchStage::test, BatchRole::batch_start},
    {"test_step", BatchStage::test, BatchRole::step},
    {"on_test_batch_end", BatchStage::test, BatchRole::batch_end},
    {"on_predict_batch_start", BatchStage::predict, BatchRole::batch_start},
    {"predict_step", BatchStage::predict, BatchRole::step},
    {"on_predict_batch_end", BatchStage::predict, BatchRole::batch_end},
};

}  // namespace

BatchHook batch_hook_of(std::string_view action) {
  // The hook is what follows the owner: "[Callback]ModelCheckpoint{'monitor':
  // 'val.loss'}.on_validation_batch_end" ends with it whatever the owner
  // holds, so compare suffixes that start a component.
  for (const Known& k : kHooks) {
    if (action.size() < k.hook.size() || action.substr(action.size() - k.hook.size()) != k.hook) continue;
    const std::size_t at = action.size() - k.hook.size();
    if (at == 0 || action[at - 1] == '.') return {k.stage, k.role};
  }
  return {};
}

const char* fetch_context(std::string_view n) {
  if (n.ends_with(".on_validation_start") || n.ends_with(".on_sanity_check_start")) return "[_EvaluationLoop].val_next";
  if (n.ends_with(".on_test_start")) return "[_EvaluationLoop].test_next";
  if (n.ends_with(".on_predict_start")) return "[_PredictionLoop].predict_next";
  if (n.ends_with(".on_validation_end") || n.ends_with(".on_train_start") || n.ends_with(".on_train_epoch_start") ||
      n == "run_training_epoch")
    return kTrainFetch;
  return nullptr;
}

}  // namespace lt
