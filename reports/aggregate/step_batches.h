// Which Lightning batch an action belongs to, from its name alone.
//
// Lightning's loops run each batch of a stage as: the fetch
// ([_TrainingEpochLoop].train_dataloader_next, [_EvaluationLoop].val_next,
// ...; the batch transfer), the on_{stage}_batch_start
// hooks (callbacks, then the LightningModule, then the strategy), the step
// function ([Strategy]X.training_step, ... ; for training inside
// "run_training_batch", with backward and the optimizer step), then the
// on_{stage}_batch_end hooks (callbacks, then the LightningModule).  Every
// hook is a profiled action named "[Kind]Owner.hook" (Lightning >= 1.6) or
// "hook" (older), so the name's last component says the stage and the role.
#pragma once
#include <string_view>

namespace lt {

enum class BatchStage { none, train, validation, test, predict };

enum class BatchRole {
  none,         // not a batch hook
  batch_start,  // the fetch, on_{stage}_batch_start
  body,         // run_training_batch: the training batch's forward/backward/optimizer
  step,         // the step function: training_step, validation_step, ...
  batch_end,    // on_{stage}_batch_end
};

struct BatchHook {
  BatchStage stage = BatchStage::none;
  BatchRole role = BatchRole::none;
};

BatchHook batch_hook_of(std::string_view action);

// The fetch action a dataloader fetch (FETCH_BEGIN: next() on Lightning's
// CombinedLoader, which Lightning 2.x does not profile) belongs to, as
// decided by the hook that starts each loop: validation (also the sanity
// check), test and predict loops each begin with their on_*_start hooks;
// training resumes after validation ends. nullptr: the action changes
// nothing.
const char* fetch_context(std::string_view action);
inline constexpr const char* kTrainFetch = "[_TrainingEpochLoop].train_dataloader_next";

}  // namespace lt
