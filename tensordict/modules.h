#pragma once

/// \file
/// All of tdfx's tensordict.nn modules: TensorDictModule, TensorDictSequential and
/// NormalParamExtractor.

#include "tdfx/tensordict/normal_param_extractor.h"
#include "tdfx/tensordict/sequential.h"
#include "tdfx/tensordict/tensordict_module.h"
