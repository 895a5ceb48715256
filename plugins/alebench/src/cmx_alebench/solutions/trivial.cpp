// cmx001 reference: every depot at the grid's centre (deterministic), in C++.
#include <cstdio>

int main() {
    int n = 0, k = 0;
    if (std::scanf("%d %d", &n, &k) != 2) return 1;
    for (int i = 0; i < k; ++i) std::printf("5000 5000\n");
    return 0;
}
