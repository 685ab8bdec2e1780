#pragma once

/// \file
/// All of tdfx's tensordict.nn modules: TensorDictModule, TensorDictSequential and
/// NormalParamExtractor.

#include "tensordict/normal_param_extractor.h"
#include "tensordict/sequential.h"
#include "tensordict/tensordict_module.h"
