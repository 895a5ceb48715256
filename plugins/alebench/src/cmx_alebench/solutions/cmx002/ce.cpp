// cmx002 test solution: does not compile (COMPILATION_ERROR)
int main() { return undeclared_lantern; }
