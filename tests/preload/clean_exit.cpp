// A program that frees everything it allocates, yet ends with blocks live
// that the C and C++ runtimes keep until the process ends: libstdc++'s
// exception pool, stdout's buffer, and the thread-local blocks glibc keeps
// with the stacks of the threads that exited. A leak report must not call
// them leaks (brisk-run --leaks exited with 23 on every such program).
#include <cstdio>
#include <stdexcept>
#include <thread>
#include <vector>

int main() {
  auto *v = new std::vector<int>(1000);
  delete v;
  try {
    throw std::runtime_error("thrown and caught");
  } catch (const std::exception &e) {
    std::printf("%s\n", e.what());
  }
  std::thread([] { std::printf("from a thread\n"); }).join();
  std::thread([] { delete[] new int[100]; }).join();
  return 0;
}
