// The ordo command.
#include <cstdio>

int main(int argc, char** argv) {
  std::fprintf(stderr, "usage: ordo node|demo ...\n");
  return 2;
}
