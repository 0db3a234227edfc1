/* A thread and its heap: the heap is made at the thread's first
 * allocation, and at its exit the heap's pages still holding blocks go with
 * their segments to the abandoned list, everything empty to the caches. */
#include "core/core.h"

/* The key whose destructor runs at thread exit, made once (pthread_once
 * orders its creation before every use). */
static pthread_once_t thread_key_once = PTHREAD_ONCE_INIT;
static pthread_key_t thread_key;
static bool thread_key_ok;

static void thread_key_create(void) { thread_key_ok = pthread_key_create(&thread_key, _bk_heap_thread_done) == 0; }

heap_t *_bk_heap_get_initialized(void) {
  heap_t *h = _bk_tls_heap;
  if (h != &_bk_heap_empty) return h;
  _bk_process_init();
  h = _bk_heap_create(false);
  if (!h) return NULL;
  _bk_tls_heap = h;
  pthread_once(&thread_key_once, thread_key_create);
  if (thread_key_ok) pthread_setspecific(thread_key, h);
  return h;
}

static void set_pages_never_delayed(heap_t *h) {
  for (unsigned kind = 0; kind < PAGED_KINDS; kind++)
    for (segment_t *seg = LIST_FIRST(&h->segments[kind], segment_t, link); seg;
         seg = LIST_NEXT(seg, segment_t, link))
      for (uint64_t pages = segment_pages_not_free(seg); pages; pages &= pages - 1) {
        page_t *pg = &seg->pages[__builtin_ctzll(pages)];
        if (pg->in_use) _bk_page_set_delayed(pg, DELAYED_NEVER, false);
      }
}

/* Thread exit: pages still holding blocks go with their segments to the
 * abandoned list; everything empty goes back to the caches. */
void _bk_heap_thread_done(void *value) {
  heap_t *h = value ? (heap_t *)value : _bk_tls_heap;
  if (h == &_bk_heap_empty) return;
  _bk_tls_heap = h; /* frees below must see the heap as local */
  _bk_transfer_flush_heap(h);
  _bk_heap_take_delayed(h);
  /* Waits out remote threads mid-way through a delayed free; after this no
   * remote thread reads this heap again. */
  set_pages_never_delayed(h);
  _bk_heap_take_delayed(h);
  _bk_hot_flush(h);
  for (unsigned kind = 0; kind < PAGED_KINDS; kind++) {
    list_node_t *n;
    while ((n = list_pop_front(&h->segments[kind]))) {
      segment_t *seg = LIST_ENTRY(n, segment_t, link);
      if (_bk_segment_collect_pages(seg, NULL) == 0) _bk_segment_release(seg);
      else _bk_abandon(seg);
    }
  }
  _bk_huge_purge_warm(h, 0, true);
  _bk_segment_threaded_flush();
  _bk_cache_huge_live_flush();
  _bk_tls_heap = &_bk_heap_empty;
  _bk_heap_unregister(h);
  _bk_abandoned_trim(_bk_heaps_live());
  _bk_purge_thread_exited(_bk_thread_heaps_live() <= 1);
  _bk_purge_tick(_bk_os_now_ms());
}
