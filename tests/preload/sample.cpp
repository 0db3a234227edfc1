// Compiled by g++ running under brisk, then run under brisk; prints a
// checksum that must match the run without brisk.
#include <algorithm>
#include <cstdint>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

template <typename T>
struct Node {
  T value;
  std::vector<std::unique_ptr<Node>> kids;
};

template <typename T>
uint64_t walk(const Node<T> &n, int depth) {
  uint64_t h = std::hash<T>{}(n.value) + static_cast<uint64_t>(depth);
  for (const auto &k : n.kids) h = h * 1099511628211ULL ^ walk(*k, depth + 1);
  return h;
}

int main() {
  std::map<std::string, std::vector<int>> m;
  std::unordered_map<int, std::string> u;
  for (int i = 0; i < 200000; ++i) {
    m["key" + std::to_string(i % 5003)].push_back(i);
    u[i % 40009] += static_cast<char>('a' + i % 26);
  }
  uint64_t h = 1469598103934665603ULL;
  for (auto &kv : m) {
    std::sort(kv.second.rbegin(), kv.second.rend());
    for (int v : kv.second) h = (h ^ static_cast<uint64_t>(v)) * 1099511628211ULL;
  }
  std::vector<std::string> keys;
  for (auto &kv : u) keys.push_back(kv.second);
  std::sort(keys.begin(), keys.end());
  for (auto &k : keys) h = (h ^ std::hash<std::string>{}(k)) * 1099511628211ULL;

  Node<std::string> root{"root", {}};
  std::vector<Node<std::string> *> all{&root};
  for (int i = 0; i < 50000; ++i) {
    Node<std::string> *p = all[static_cast<size_t>(i * 7919) % all.size()];
    p->kids.emplace_back(new Node<std::string>{std::string(i % 50, 'n') + std::to_string(i), {}});
    all.push_back(p->kids.back().get());
  }
  h ^= walk(root, 0);

  std::vector<std::thread> ts;
  std::vector<uint64_t> parts(4);
  for (int t = 0; t < 4; ++t)
    ts.emplace_back([t, &parts] {
      std::ostringstream os;
      std::vector<std::string> v;
      for (int i = 0; i < 30000; ++i) v.push_back(std::string(static_cast<size_t>(i % 300), 'a' + t));
      for (auto &s : v) os << s.size() << ',';
      parts[static_cast<size_t>(t)] = std::hash<std::string>{}(os.str());
    });
  for (auto &t : ts) t.join();
  for (uint64_t p : parts) h = (h ^ p) * 1099511628211ULL;
  std::cout << "checksum " << h << " nodes " << all.size() << "\n";
  return 0;
}
