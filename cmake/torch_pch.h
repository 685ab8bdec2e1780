// Precompiled in every tdfx target: the LibTorch headers most files read.
#pragma once
#include <ATen/ATen.h>
#include <fmt/format.h>
#include <torch/nn/module.h>

#include <string>
#include <vector>
