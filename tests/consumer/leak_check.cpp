// Must fail to compile against the installed tdfx: headers are reached as <tdfx/...> only.
#include "graph/graph.h"

int main() { return 0; }
