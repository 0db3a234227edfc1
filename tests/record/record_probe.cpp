// A program for tests/record/record.sh to record (brisk-run --record) and
// replay: every call the recorder interposes, threads that free each
// other's blocks, a forked child, and a mode that waits to be killed.
//
//   record_probe threads   producers hand blocks to consumers that free them;
//                          prints a checksum of what went through (the same
//                          with and without recording)
//   record_probe forever   allocates and frees until killed; prints "ready"
//                          once it has made 200000 calls
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <new>

namespace {

const int kProducers = 2, kConsumers = 2, kBlocksEach = 20000;

// A bounded queue of blocks between threads.
struct Queue {
  pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
  pthread_cond_t changed = PTHREAD_COND_INITIALIZER;
  void *slots[256];
  size_t sizes[256];
  int head = 0, count = 0, producers_left = kProducers;
};
Queue queue;

uint64_t mix(uint64_t x) {
  x ^= x >> 31;
  x *= 0x9e3779b97f4a7c15ull;
  return x ^ (x >> 29);
}

void *produce(void *arg) {
  uint64_t seed = (uint64_t)(uintptr_t)arg;
  for (int i = 0; i < kBlocksEach; i++) {
    seed = mix(seed + (uint64_t)i);
    size_t size = 16 + seed % 4000;
    unsigned char *p = (unsigned char *)malloc(size);
    memset(p, (int)(size & 0xff), size);
    if (i % 7 == 0) p = (unsigned char *)realloc(p, size * 2), memset(p, (int)(size & 0xff), size * 2), size *= 2;
    // Blocks this thread keeps a moment, of every other kind.
    void *own[6];
    own[0] = calloc(4, 24);
    own[1] = aligned_alloc(64, 256);
    if (posix_memalign(&own[2], 128, 100)) own[2] = nullptr;
    own[3] = memalign(32, 48);
    own[4] = reallocarray(nullptr, 3, 40);
    own[5] = malloc(1 + i % 300);
    if (malloc_usable_size(own[5]) < (size_t)(1 + i % 300)) abort();
    for (void *q : own) free(q);
    pthread_mutex_lock(&queue.lock);
    while (queue.count == 256) pthread_cond_wait(&queue.changed, &queue.lock);
    int at = (queue.head + queue.count++) % 256;
    queue.slots[at] = p;
    queue.sizes[at] = size;
    pthread_cond_broadcast(&queue.changed);
    pthread_mutex_unlock(&queue.lock);
  }
  pthread_mutex_lock(&queue.lock);
  queue.producers_left--;
  pthread_cond_broadcast(&queue.changed);
  pthread_mutex_unlock(&queue.lock);
  return nullptr;
}

void *consume(void *arg) {
  uint64_t *sum = (uint64_t *)arg;
  for (;;) {
    pthread_mutex_lock(&queue.lock);
    while (queue.count == 0 && queue.producers_left > 0) pthread_cond_wait(&queue.changed, &queue.lock);
    if (queue.count == 0) {
      pthread_mutex_unlock(&queue.lock);
      return nullptr;
    }
    unsigned char *p = (unsigned char *)queue.slots[queue.head];
    size_t size = queue.sizes[queue.head];
    queue.head = (queue.head + 1) % 256;
    queue.count--;
    pthread_cond_broadcast(&queue.changed);
    pthread_mutex_unlock(&queue.lock);
    *sum += size + p[size - 1];
    free(p);
  }
}

// Every form of new and delete.
uint64_t cxx_forms() {
  uint64_t sum = 0;
  for (int i = 0; i < 1000; i++) {
    int *a = new int(i);
    int *b = new int[4 + i % 8];
    void *c = ::operator new(24 + i % 100, std::nothrow);
    void *d = ::operator new (64, std::align_val_t{64});
    void *e = ::operator new[](200, std::align_val_t{256}, std::nothrow);
    void *f = ::operator new(48);
    sum += (uint64_t)*a + (((uintptr_t)d | (uintptr_t)e) & 63);
    delete a;
    delete[] b;
    ::operator delete(c, std::nothrow);
    ::operator delete (d, std::align_val_t{64});
    ::operator delete[](e, 200, std::align_val_t{256});
    ::operator delete(f, 48);
  }
  return sum;
}

int threads_mode() {
  pthread_t producers[kProducers], consumers[kConsumers];
  uint64_t sums[kConsumers] = {0};
  for (int i = 0; i < kProducers; i++) pthread_create(&producers[i], nullptr, produce, (void *)(uintptr_t)(i + 1));
  for (int i = 0; i < kConsumers; i++) pthread_create(&consumers[i], nullptr, consume, &sums[i]);
  for (pthread_t t : producers) pthread_join(t, nullptr);
  for (pthread_t t : consumers) pthread_join(t, nullptr);
  // A child allocates too: it gets a trace file of its own.
  pid_t child = fork();
  if (child == 0) {
    for (int i = 0; i < 1000; i++) free(malloc(100 + i));
    _exit(0);
  }
  int status = 0;
  waitpid(child, &status, 0);
  printf("blocks through the queue: %d, checksum %llu, C++ %llu, child %d\n", kProducers * kBlocksEach,
         (unsigned long long)(sums[0] + sums[1]), (unsigned long long)cxx_forms(), WEXITSTATUS(status));
  return 0;
}

int forever_mode() {
  void *kept[512] = {nullptr};
  for (uint64_t i = 0;; i++) {
    size_t slot = mix(i) % 512;
    free(kept[slot]);
    kept[slot] = malloc(16 + mix(i + 7) % 2000);
    if (i == 100000) {
      printf("ready\n");
      fflush(stdout);
    }
    if (i > 100000 && i % 1000 == 0) usleep(1000);
  }
}

}  // namespace

int main(int argc, char **argv) {
  if (argc > 1 && !strcmp(argv[1], "forever")) return forever_mode();
  return threads_mode();
}
