// A guard-page malloc for finding reads past the end of heap blocks by code no sanitizer sees
// (OpenBLAS, LAPACK). Preloaded (LD_PRELOAD), it gives every block of at least `gm_min` bytes its own
// mapping whose end touches a PROT_NONE page, so a load past the end faults at once instead of
// reading a neighbour. Blocks end within their alignment of the page (16 bytes for malloc).
// gm_set_min(n) changes the threshold at run time (guard_malloc_plugin.py sets it per test: the
// mappings are one each, and a whole interpreter's import would exhaust vm.max_map_count).
// Smaller blocks go to glibc's allocator; free() tells the two apart by 16 bytes before the block.
#define _GNU_SOURCE
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

extern void* __libc_malloc(size_t);
extern void* __libc_calloc(size_t, size_t);
extern void* __libc_realloc(void*, size_t);
extern void* __libc_memalign(size_t, size_t);
extern void __libc_free(void*);

enum { kPage = 4096 };
static const uint64_t kTag = 0x67756172646d616cULL;  // "guardmal"

// At the mapping's start: its length and the block's size. In the 16 bytes before the block: kTag ^
// the block's address and the mapping's start. free() reads only those 16 bytes of a pointer it is
// given, which for one of glibc's blocks are its chunk header, always mapped.
typedef struct {
  size_t length;  // the mapping's length, guard page included
  size_t size;    // the block's size
} Mapping;
typedef struct {
  uint64_t check;  // kTag ^ the block's address
  Mapping* base;
} Header;

static size_t gm_min = SIZE_MAX;

void gm_set_min(size_t n) { gm_min = n; }

static size_t threshold(void) {
  if (gm_min == SIZE_MAX) {
    const char* e = getenv("GM_MIN");
    gm_min = e ? strtoull(e, NULL, 10) : 65536;
  }
  return gm_min;
}

static void* guarded(size_t size, size_t align) {
  if (align < 16) align = 16;
  if (size > SIZE_MAX / 2) return NULL;
  const size_t need = size + sizeof(Mapping) + sizeof(Header) + align;
  const size_t length = (need + kPage - 1) / kPage * kPage + kPage;
  char* base = mmap(NULL, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (base == MAP_FAILED) return NULL;
  char* guard = base + length - kPage;
  if (mprotect(guard, kPage, PROT_NONE) != 0) {
    munmap(base, length);
    return NULL;
  }
  const uintptr_t p = ((uintptr_t)guard - size) & ~(uintptr_t)(align - 1);
  Mapping* m = (Mapping*)base;
  m->length = length, m->size = size;
  Header* h = (Header*)(p - sizeof(Header));
  h->check = kTag ^ p, h->base = m;
  return (void*)p;
}

static Mapping* mapping_of(void* p) {
  if (!p || ((uintptr_t)p & 15)) return NULL;
  const Header* h = (const Header*)((char*)p - sizeof(Header));
  return h->check == (kTag ^ (uintptr_t)p) ? h->base : NULL;
}

// The usable size of one of glibc's blocks, from its chunk header (mmapped chunks carry 16 bytes of
// header, others 8).
static size_t libc_size(void* p) {
  const size_t word = ((size_t*)p)[-1];
  return (word & ~(size_t)7) - ((word & 2) ? 16 : 8);
}

void* malloc(size_t n) { return n >= threshold() ? guarded(n, 16) : __libc_malloc(n); }

void free(void* p) {
  Mapping* m = mapping_of(p);
  if (!m) return __libc_free(p);
  ((Header*)((char*)p - sizeof(Header)))->check = 0;
  munmap(m, m->length);
}

size_t malloc_usable_size(void* p) {
  if (!p) return 0;
  Mapping* m = mapping_of(p);
  return m ? m->size : libc_size(p);
}

void* calloc(size_t a, size_t b) {
  if (b && a > SIZE_MAX / b) return NULL;
  const size_t n = a * b;
  return n >= threshold() ? guarded(n, 16) : __libc_calloc(a, b);  // (fresh mappings are zeros)
}

void* realloc(void* p, size_t n) {
  Mapping* m = mapping_of(p);
  if (!m && n < threshold()) return __libc_realloc(p, n);
  if (!p) return malloc(n);
  const size_t old = m ? m->size : libc_size(p);
  void* q = malloc(n);
  if (!q) return NULL;
  memcpy(q, p, old < n ? old : n);
  free(p);
  return q;
}

void* memalign(size_t align, size_t n) {
  if (align & (align - 1)) {  // (glibc rounds a non-power of two up)
    size_t a = 16;
    while (a < align) a <<= 1;
    align = a;
  }
  return n >= threshold() ? guarded(n, align) : __libc_memalign(align, n);
}

void* aligned_alloc(size_t align, size_t n) { return memalign(align, n); }

int posix_memalign(void** out, size_t align, size_t n) {
  if (align < sizeof(void*) || (align & (align - 1))) return EINVAL;
  void* p = memalign(align, n);
  if (!p) return ENOMEM;
  *out = p;
  return 0;
}

void* valloc(size_t n) { return memalign(kPage, n); }

void* pvalloc(size_t n) { return memalign(kPage, (n + kPage - 1) / kPage * kPage); }
