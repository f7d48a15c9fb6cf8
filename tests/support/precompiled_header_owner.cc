// The target that builds the test programs' shared precompiled header (tests/CMakeLists.txt,
// gpuslice_test_pch): every test program reuses it (REUSE_FROM), so it is compiled once. A
// precompiled header belongs to a target of the same kind and flags as its users: an executable.
int main() { return 0; }
