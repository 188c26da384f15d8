/* The public entry point of an attnforge kernel built ahead of time.
 *
 * attn-gen compiles this text into every kernel's library, after halide_buffer_layout.h and
 * call_context.h, and before what it generates for the kernel (runtime/aot_entry.cpp): the table
 * of its tensors, and the functions NAME and NAME_error. NAME checks each halide_buffer_t against
 * the table, as the JIT checks its tensor views (runtime/tensor_checks.cpp), then runs the pipeline,
 * NAME_unchecked, with a user_context through which Halide's own run-time errors (out of memory,
 * a device error) come back here instead of reaching a handler that prints and aborts, and through
 * which the blocks of its intermediates are kept for the next call. A call that fails returns a
 * negative halide_error_code_t, writes nothing to the outputs if a check failed, and leaves its
 * message for NAME_error.
 *
 * Compiled with -ffreestanding and no header but <stddef.h> and <stdint.h>: a compiler for the
 * kernel's target is all it needs. Everything here is static, so any number of kernels link into
 * one program. */

#include <stddef.h>

/* Halide's codes (HalideRuntime.h, halide_error_code_t) for what the checks find. */
enum {
  attn_bad_type = -3,
  attn_extents_too_large = -6,
  attn_constraint_violated = -8,
  attn_buffer_is_null = -12,
  attn_extents_negative = -28,
  attn_host_is_null = -34,
  attn_bad_dimensions = -43
};

#define ATTN_INT32_MAX 2147483647

/* ---- Messages ---------------------------------------------------------------------------- */

/* A message being written into a buffer: what does not fit is cut off. */
struct attn_text {
  char *at, *end; /* end: the last byte of the buffer, kept for the terminating 0 */
};

static void attn_put(struct attn_text *t, const char *s) {
  while (*s != 0 && t->at < t->end) *t->at++ = *s++;
  *t->at = 0;
}

static void attn_put_int(struct attn_text *t, int64_t v) {
  char reversed[24], s[24];
  uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
  int n = 0, i;
  do {
    reversed[n++] = (char)('0' + (int)(u % 10));
    u /= 10;
  } while (u != 0);
  if (v < 0) reversed[n++] = '-';
  for (i = 0; i < n; ++i) s[i] = reversed[n - 1 - i];
  s[n] = 0;
  attn_put(t, s);
}

static int attn_same(const char *a, const char *b) {
  while (*a != 0 && *a == *b) ++a, ++b;
  return *a == *b;
}

/* ---- The kernel's tensors (the table attn-gen generates) --------------------------------- */

/* Who sets a dim's size. */
enum attn_size_kind {
  attn_size_free,  /* the caller, once per call: the same in every tensor where the name recurs */
  attn_size_fixed, /* the expression */
  attn_size_bound  /* attn-gen --bind, when the kernel was built */
};

struct attn_dim_spec {
  const char *name;
  int64_t size; /* fixed or bound: the size; free: 0 */
  enum attn_size_kind kind;
};

struct attn_tensor_spec {
  const char *name;
  int output;  /* written by the kernel: must not overlap itself nor any other tensor */
  int code, bits;        /* the elements' halide_type_t: int32 (0, 32), float32 (2, 32), float16 (2, 16), bfloat16 (4, 16) */
  const char *type_name; /* "int32", "float32", "float16", "bfloat16" */
  int batched; /* one more dim, the batch, outermost (last in the halide_buffer_t) */
  int rank;    /* dims without the batch */
  const struct attn_dim_spec *dims; /* row-major: dims[0] outermost */
};

struct attn_kernel_spec {
  int count; /* tensors, in call order: inputs, then outputs */
  const struct attn_tensor_spec *tensors;
  int large_buffers; /* Halide's large_buffers feature: 64-bit offsets, no int32 limits */
};

/* ---- The checks ---------------------------------------------------------------------------- */

static const struct attn_dim_spec attn_batch_dim = {"batch", 0, attn_size_free};

/* Halide dim k of t (innermost first; the batch last). */
static const struct attn_dim_spec *attn_dim_at(const struct attn_tensor_spec *t, int k) {
  return k == t->rank ? &attn_batch_dim : &t->dims[t->rank - 1 - k];
}

/* Starts a message about t: "tensor 'q': " or "output 'lse': ". */
static void attn_about(struct attn_text *m, const struct attn_tensor_spec *t) {
  attn_put(m, t->output ? "output '" : "tensor '");
  attn_put(m, t->name);
  attn_put(m, "': ");
}

static void attn_put_dims(struct attn_text *m, const struct attn_tensor_spec *t) {
  int i;
  attn_put(m, t->batched ? "[batch" : "[");
  for (i = 0; i < t->rank; ++i) {
    if (i > 0 || t->batched) attn_put(m, ", ");
    attn_put(m, t->dims[i].name);
  }
  attn_put(m, "]");
}

static void attn_put_type(struct attn_text *m, struct attn_halide_type type) {
  static const char *const codes[] = {"int", "uint", "float", "handle", "bfloat"};
  attn_put(m, type.code < 5 ? codes[type.code] : "type ");
  attn_put_int(m, type.bits);
  if (type.lanes != 1) {
    attn_put(m, "x");
    attn_put_int(m, type.lanes);
  }
}

/* The sizes of the free dims (and the batch) a call has met so far, and which tensor set each. */
enum { attn_max_names = 64 }; /* attn-gen refuses kernels with more distinct dim names */
struct attn_call_sizes {
  int count;
  const char *name[attn_max_names], *tensor[attn_max_names];
  int64_t size[attn_max_names];
};

static int attn_check_size(struct attn_text *m, const struct attn_tensor_spec *t, const struct attn_dim_spec *d, int64_t given,
                           struct attn_call_sizes *sizes) {
  int i;
  if (d->kind != attn_size_free) {
    if (given == d->size) return 0;
    attn_about(m, t);
    attn_put(m, d->name);
    attn_put(m, " is ");
    attn_put_int(m, d->size);
    attn_put(m, d->kind == attn_size_bound ? " in this kernel (bound when it was built), got " : " in this kernel, got ");
    attn_put_int(m, given);
    return attn_constraint_violated;
  }
  for (i = 0; i < sizes->count; ++i) {
    if (!attn_same(sizes->name[i], d->name)) continue;
    if (given == sizes->size[i]) return 0;
    attn_about(m, t);
    attn_put(m, d->name);
    attn_put(m, " is ");
    attn_put_int(m, sizes->size[i]);
    attn_put(m, " in this call (as in tensor '");
    attn_put(m, sizes->tensor[i]);
    attn_put(m, "'), got ");
    attn_put_int(m, given);
    return attn_constraint_violated;
  }
  if (sizes->count < attn_max_names) {
    sizes->name[sizes->count] = d->name;
    sizes->tensor[sizes->count] = t->name;
    sizes->size[sizes->count++] = given;
  }
  return 0;
}

/* Halide addresses an element by an int32 offset from the first (without large_buffers) and
 * holds at most 2^31 - 1 elements. */
static int attn_check_limits(struct attn_text *m, const struct attn_tensor_spec *t, const struct attn_halide_buffer *b) {
  const int64_t cap = (int64_t)1 << 62; /* sums and products stop there: no overflow, far above the limit */
  int64_t reach = 0, elements = 1;
  int k;
  for (k = 0; k < b->dimensions; ++k) {
    const int64_t extent = b->dim[k].extent, stride = b->dim[k].stride; /* extent >= 1: checked */
    reach += (extent - 1) * (stride < 0 ? -stride : stride);            /* each term < 2^62 */
    if (reach > cap) reach = cap;
    elements = elements > cap / extent ? cap : elements * extent;
  }
  if (reach > ATTN_INT32_MAX) {
    attn_about(m, t);
    attn_put(m, "its last element is ");
    attn_put_int(m, reach);
    attn_put(m, " elements from its first, above 2147483647: this kernel addresses buffers with int32 offsets");
    return attn_extents_too_large;
  }
  if (elements > ATTN_INT32_MAX) {
    attn_about(m, t);
    attn_put(m, "it holds ");
    attn_put_int(m, elements);
    attn_put(m, " elements, above 2147483647: this kernel addresses buffers with int32 offsets");
    return attn_extents_too_large;
  }
  return 0;
}

/* An output must not write two of its elements to one address: sorted by stride, each dim of
 * size > 1 steps past everything the dims inside it reach (runtime/aliasing.cpp, for the JIT). */
static int attn_check_no_self_overlap(struct attn_text *m, const struct attn_tensor_spec *t, const struct attn_halide_buffer *b) {
  int order[8], n = 0, i, j;
  int64_t reach = 0;
  for (i = 0; i < b->dimensions && i < 8; ++i) {
    if (b->dim[i].extent == 1) continue;
    if (b->dim[i].stride == 0) {
      attn_about(m, t);
      attn_put(m, attn_dim_at(t, i)->name);
      attn_put(m, " has stride 0 and size ");
      attn_put_int(m, b->dim[i].extent);
      attn_put(m, ": its elements would all be written to one address");
      return attn_constraint_violated;
    }
    order[n++] = i;
  }
  for (i = 1; i < n; ++i) /* insertion sort by |stride|: at most 5 dims */
    for (j = i; j > 0; --j) {
      const int64_t a = b->dim[order[j - 1]].stride, c = b->dim[order[j]].stride;
      if ((a < 0 ? -a : a) <= (c < 0 ? -c : c)) break;
      const int swap = order[j - 1];
      order[j - 1] = order[j];
      order[j] = swap;
    }
  for (i = 0; i < n; ++i) {
    const struct attn_halide_dimension *d = &b->dim[order[i]];
    const int64_t stride = d->stride < 0 ? -(int64_t)d->stride : d->stride;
    if (stride <= reach) {
      attn_about(m, t);
      attn_put(m, attn_dim_at(t, order[i])->name);
      attn_put(m, " (stride ");
      attn_put_int(m, d->stride);
      attn_put(m, ") steps within the ");
      attn_put_int(m, reach + 1);
      attn_put(m, " elements the dims inside it span: two elements would share an address");
      return attn_constraint_violated;
    }
    reach += (d->extent - 1) * stride;
  }
  return 0;
}

static int attn_check_tensor(struct attn_text *m, const struct attn_tensor_spec *t, const struct attn_halide_buffer *b, int large_buffers,
                             struct attn_call_sizes *sizes) {
  const int dims = t->rank + (t->batched ? 1 : 0);
  int k, code;
  if (b == 0) {
    attn_about(m, t);
    attn_put(m, "the halide_buffer_t pointer is NULL");
    return attn_buffer_is_null;
  }
  if (b->type.code != t->code || b->type.bits != t->bits || b->type.lanes != 1) {
    attn_about(m, t);
    attn_put(m, "expected ");
    attn_put(m, t->type_name);
    attn_put(m, ", got ");
    attn_put_type(m, b->type);
    return attn_bad_type;
  }
  if (b->dimensions != dims || b->dim == 0) {
    attn_about(m, t);
    attn_put(m, "expected ");
    attn_put_int(m, dims);
    attn_put(m, " dims ");
    attn_put_dims(m, t);
    attn_put(m, " (a halide_buffer_t lists them innermost first), got ");
    attn_put_int(m, b->dimensions);
    if (b->dim == 0 && b->dimensions == dims) attn_put(m, " and a NULL dim array");
    return attn_bad_dimensions;
  }
  if (b->host == 0 && b->device == 0) {
    attn_about(m, t);
    attn_put(m, "no data: host is NULL and there is no device buffer");
    return attn_host_is_null;
  }
  for (k = 0; k < dims; ++k) {
    const struct attn_dim_spec *d = attn_dim_at(t, k);
    const struct attn_halide_dimension *given = &b->dim[k];
    if (given->min != 0) {
      attn_about(m, t);
      attn_put(m, d->name);
      attn_put(m, " starts at ");
      attn_put_int(m, given->min);
      attn_put(m, " (its min); this kernel's dims start at 0");
      return attn_constraint_violated;
    }
    if (given->extent < 1) {
      attn_about(m, t);
      attn_put(m, d->name);
      attn_put(m, " has size ");
      attn_put_int(m, given->extent);
      attn_put(m, "; sizes must be at least 1");
      return given->extent < 0 ? attn_extents_negative : attn_constraint_violated;
    }
    if ((code = attn_check_size(m, t, d, given->extent, sizes)) != 0) return code;
  }
  if (b->dim[0].stride != 1) {
    attn_about(m, t);
    attn_put(m, attn_dim_at(t, 0)->name);
    attn_put(m, ", the innermost dim, has stride ");
    attn_put_int(m, b->dim[0].stride);
    attn_put(m, "; it must be 1 (dense)");
    return attn_constraint_violated;
  }
  if (!large_buffers && (code = attn_check_limits(m, t, b)) != 0) return code;
  if (t->output && (code = attn_check_no_self_overlap(m, t, b)) != 0) return code;
  return 0;
}

/* The bytes from b's lowest to its highest element, both included (its type checked: its bits are its elements'). */
struct attn_bytes {
  uintptr_t first, last;
};

static struct attn_bytes attn_bytes_of(const struct attn_halide_buffer *b) {
  int64_t low = 0, high = 0;
  int k;
  struct attn_bytes r;
  for (k = 0; k < b->dimensions; ++k) {
    const int64_t reach = (int64_t)(b->dim[k].extent - 1) * b->dim[k].stride;
    if (reach < 0) low += reach;
    else high += reach;
  }
  const int64_t element = b->type.bits / 8;
  r.first = (uintptr_t)b->host + (uintptr_t)(low * element);
  r.last = (uintptr_t)b->host + (uintptr_t)(high * element + element - 1);
  return r;
}

/* An output that overlaps an input would overwrite values the kernel still reads; two outputs
 * that overlap would overwrite each other. Buffers without host memory (on a device) are not
 * compared. */
static int attn_check_overlaps(struct attn_text *m, const struct attn_kernel_spec *k, struct attn_halide_buffer *const *b) {
  int i, j;
  for (i = 0; i < k->count; ++i) {
    if (!k->tensors[i].output || b[i]->host == 0) continue;
    for (j = 0; j < k->count; ++j) {
      if (j == i || b[j]->host == 0 || (k->tensors[j].output && j < i)) continue;
      const struct attn_bytes a = attn_bytes_of(b[i]), c = attn_bytes_of(b[j]);
      if (a.first > c.last || c.first > a.last) continue;
      attn_about(m, &k->tensors[i]);
      attn_put(m, "it overlaps ");
      attn_put(m, k->tensors[j].output ? "output '" : "tensor '");
      attn_put(m, k->tensors[j].name);
      attn_put(m, k->tensors[j].output ? "' in memory: outputs must not share memory"
                                       : "' in memory: the kernel would overwrite values it still reads");
      return attn_constraint_violated;
    }
  }
  return 0;
}

static int attn_check(struct attn_text *m, const struct attn_kernel_spec *k, struct attn_halide_buffer *const *b) {
  struct attn_call_sizes sizes;
  int i, code;
  sizes.count = 0;
  for (i = 0; i < k->count; ++i)
    if ((code = attn_check_tensor(m, &k->tensors[i], b[i], k->large_buffers, &sizes)) != 0) return code;
  return attn_check_overlaps(m, k, b);
}

/* ---- Halide's errors during the call ------------------------------------------------------- */

typedef void (*attn_error_handler_t)(void *user_context, const char *message);
extern attn_error_handler_t halide_set_error_handler(attn_error_handler_t handler); /* Halide's runtime, in this library */
extern void halide_default_error(void *user_context, const char *message);

/* The handler that was installed before this library's, for the errors of other Halide code. */
static attn_error_handler_t attn_previous_handler;

/* user_context: an attnforge call's (struct attn_call, call_context.h), or other Halide code's:
 * NULL, or a pointer to at least 8 readable bytes (its first 8 are compared with the magic). */
static void attn_error_handler(void *user_context, const char *message) {
  struct attn_call *call = (struct attn_call *)user_context;
  if (call != 0 && call->magic == ATTN_CALL_MAGIC) {
    if (__atomic_exchange_n(&call->reported, 1, __ATOMIC_ACQ_REL) == 0) {
      struct attn_text t = {call->message, call->message + attn_message_size - 1};
      attn_put(&t, message);
    }
    return;
  }
  const attn_error_handler_t previous = __atomic_load_n(&attn_previous_handler, __ATOMIC_ACQUIRE);
  if (previous != 0) previous(user_context, message);
  else halide_default_error(user_context, message);
}

/* ---- Memory for the call's intermediates ------------------------------------------------------ */

/* Halide allocates a call's intermediates (a transposed copy of K, a backward's sums) through
 * halide_malloc and frees them before the call returns. Freed to the C library, a block of a few
 * MiB goes back to the system, and the next call faults its pages in again (a forward at T = 1024,
 * Dh = 128: ~3000 faults a call, 10-20% of it). So an attnforge call's blocks of 1 MiB and more are
 * kept when freed and handed to a later call that needs about as much, as the JIT keeps them
 * (runtime/scratch_memory.hpp, whose rules these are: the JIT does not load this code): in steps of
 * 64 KiB, the smallest kept block of at most twice the size, at most ATTN_SCRATCH_CACHE bytes kept
 * (a size in bytes, optionally with K, M or G; 512 MiB if unset), the oldest dropped first.
 * Such a block comes from the allocator installed before this library's (Halide's default, or the
 * program's) with a NULL user_context, which the allocators of a chain of attnforge libraries pass
 * on to the first that is not one; the library that lends it to a call lists it, and a free of a
 * block it did not lend goes on to the free installed before (down a chain, to the one that lent
 * it). Every other block, small or of other Halide code, is the allocator's installed before. */

typedef void *(*attn_malloc_t)(void *user_context, size_t bytes);
typedef void (*attn_free_t)(void *user_context, void *block);
extern attn_malloc_t halide_set_custom_malloc(attn_malloc_t handler); /* Halide's runtime, in this library */
extern attn_free_t halide_set_custom_free(attn_free_t handler);
struct halide_mutex {
  uintptr_t _private[1];
};
extern void halide_mutex_lock(struct halide_mutex *mutex);
extern void halide_mutex_unlock(struct halide_mutex *mutex);
extern char *getenv(const char *name);

enum { attn_kept_most = 16, attn_lent_most = 64 };
#define ATTN_LARGE_BLOCK ((size_t)1 << 20)
#define ATTN_LARGE_STEP ((size_t)1 << 16)

struct attn_block {
  void *base; /* 0: an empty slot */
  size_t capacity;
};

static attn_malloc_t attn_previous_malloc;
static attn_free_t attn_previous_free;
static size_t attn_kept_limit;
/* Under attn_blocks_mutex; a lent block's base is also read without it (atomically), by frees
 * looking for their block. */
static struct halide_mutex attn_blocks_mutex;
static struct attn_block attn_kept[attn_kept_most]; /* oldest first */
static int attn_kept_count;
static size_t attn_kept_bytes;
static struct attn_block attn_lent[attn_lent_most];

static int attn_is_call(void *user_context) {
  return user_context != 0 && ((struct attn_call *)user_context)->magic == ATTN_CALL_MAGIC;
}

/* ATTN_SCRATCH_CACHE as runtime/environment.cpp reads it; 512 MiB if unset or not a size. */
static size_t attn_scratch_limit(void) {
  const size_t fallback = (size_t)512 << 20, largest = (size_t)-1 >> 1;
  const char *s = getenv("ATTN_SCRATCH_CACHE");
  size_t n = 0;
  int digits = 0, shift;
  if (s == 0) return fallback;
  for (; *s >= '0' && *s <= '9'; ++s, ++digits) {
    if (n > (largest - (size_t)(*s - '0')) / 10) return fallback;
    n = n * 10 + (size_t)(*s - '0');
  }
  if (digits == 0) return fallback;
  if (*s == 0) return n;
  shift = *s == 'K' ? 10 : *s == 'M' ? 20 : *s == 'G' ? 30 : 0;
  if (shift == 0 || s[1] != 0 || n > (largest >> shift)) return fallback;
  return n << shift;
}

/* The kept block at i, taken out of the list. Under the mutex. */
static struct attn_block attn_unkeep(int i) {
  const struct attn_block b = attn_kept[i];
  attn_kept_bytes -= b.capacity;
  for (; i + 1 < attn_kept_count; ++i) attn_kept[i] = attn_kept[i + 1];
  --attn_kept_count;
  return b;
}

static void *attn_malloc(void *user_context, size_t bytes) {
  const attn_malloc_t previous = __atomic_load_n(&attn_previous_malloc, __ATOMIC_ACQUIRE);
  struct attn_block b = {0, 0};
  int slot = -1, best = -1, i;
  if (!attn_is_call(user_context) || bytes < ATTN_LARGE_BLOCK || bytes > (size_t)-1 - ATTN_LARGE_STEP)
    return previous(user_context, bytes);
  b.capacity = (bytes + ATTN_LARGE_STEP - 1) / ATTN_LARGE_STEP * ATTN_LARGE_STEP;
  halide_mutex_lock(&attn_blocks_mutex);
  for (i = 0; i < attn_lent_most && slot < 0; ++i)
    if (attn_lent[i].base == 0) slot = i;
  for (i = 0; i < attn_kept_count && slot >= 0; ++i)
    if (attn_kept[i].capacity >= b.capacity && attn_kept[i].capacity / 2 <= b.capacity &&
        (best < 0 || attn_kept[i].capacity < attn_kept[best].capacity))
      best = i;
  if (best >= 0) b = attn_unkeep(best);
  else if (slot >= 0) b.base = previous(0, b.capacity);
  if (b.base != 0 && slot >= 0) {
    attn_lent[slot].capacity = b.capacity;
    __atomic_store_n(&attn_lent[slot].base, b.base, __ATOMIC_RELEASE);
  }
  halide_mutex_unlock(&attn_blocks_mutex);
  /* Every slot taken (calls on as many threads): an unlisted block, freed as it came. */
  return slot >= 0 ? b.base : previous(user_context, bytes);
}

/* A lent block is kept, the oldest kept ones dropped past the limit or the list's length (a block
 * alone past the limit: freed). */
static void attn_free(void *user_context, void *block) {
  const attn_free_t previous = __atomic_load_n(&attn_previous_free, __ATOMIC_ACQUIRE);
  struct attn_block b, dropped[attn_kept_most];
  int slot = -1, n = 0, i;
  if (block != 0 && attn_is_call(user_context))
    for (i = 0; i < attn_lent_most && slot < 0; ++i)
      if (__atomic_load_n(&attn_lent[i].base, __ATOMIC_ACQUIRE) == block) slot = i;
  if (slot < 0) {
    previous(user_context, block);
    return;
  }
  halide_mutex_lock(&attn_blocks_mutex);
  b = attn_lent[slot];
  __atomic_store_n(&attn_lent[slot].base, (void *)0, __ATOMIC_RELEASE);
  if (b.capacity > attn_kept_limit) {
    dropped[n++] = b;
  } else {
    attn_kept[attn_kept_count++] = b;
    attn_kept_bytes += b.capacity;
    while (attn_kept_bytes > attn_kept_limit || attn_kept_count == attn_kept_most) dropped[n++] = attn_unkeep(0);
  }
  halide_mutex_unlock(&attn_blocks_mutex);
  for (i = 0; i < n; ++i) previous(0, dropped[i].base);
}

/* ---- Installing the handlers ----------------------------------------------------------------- */

/* Installed once, at this library's first call (with a CUDA kernel's register limit): the error
 * handler and the allocator. The handlers they replace (Halide's defaults, or the program's) keep
 * receiving everything that is not an attnforge call's. Installing once keeps the chains of
 * handlers of several libraries free of cycles. */
static void attn_install_handlers(void) {
  static int state; /* 0: not installed, 1: being installed, 2: installed */
  int expected = 0;
  if (__atomic_load_n(&state, __ATOMIC_ACQUIRE) == 2) return;
  if (__atomic_compare_exchange_n(&state, &expected, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
#ifdef ATTN_CUDA_REGISTERS
    /* The registers a CUDA thread may use, read by Halide's CUDA runtime when it loads the
     * kernels at the first call (flash_gpu_schedule.hpp: cuda_registers_per_thread); a value the
     * program set stays. */
    setenv("HL_CUDA_JIT_MAX_REGISTERS", ATTN_CUDA_REGISTERS, 0);
#endif
    __atomic_store_n(&attn_previous_handler, halide_set_error_handler(attn_error_handler), __ATOMIC_RELEASE);
    attn_kept_limit = attn_scratch_limit();
    __atomic_store_n(&attn_previous_free, halide_set_custom_free(attn_free), __ATOMIC_RELEASE);
    __atomic_store_n(&attn_previous_malloc, halide_set_custom_malloc(attn_malloc), __ATOMIC_RELEASE);
    __atomic_store_n(&state, 2, __ATOMIC_RELEASE);
  }
  while (__atomic_load_n(&state, __ATOMIC_ACQUIRE) != 2) {
  }
}

/* ---- The call ---------------------------------------------------------------------------- */

/* The message of this thread's last call of the kernel: "" when it succeeded. */
static _Thread_local char attn_last_message[attn_message_size];

struct halide_buffer_t;
typedef int (*attn_pipeline_t)(void *user_context, struct halide_buffer_t **buffers);

static int attn_checked_call(const struct attn_kernel_spec *k, struct halide_buffer_t **buffers, attn_pipeline_t pipeline) {
  struct attn_text m = {attn_last_message, attn_last_message + attn_message_size - 1};
  struct attn_call call;
  int code;
  attn_last_message[0] = 0;
  if ((code = attn_check(&m, k, (struct attn_halide_buffer *const *)buffers)) != 0) return code;
  attn_install_handlers();
  call.magic = ATTN_CALL_MAGIC;
  call.reported = 0;
  call.message[0] = 0;
  if ((code = pipeline(&call, buffers)) == 0) return 0;
  attn_put(&m, "kernel failed (Halide error ");
  attn_put_int(&m, code);
  attn_put(&m, "): ");
  attn_put(&m, call.reported ? call.message
                             : "the message went to an error handler installed with halide_set_error_handler after this kernel's first call");
  while (m.at > attn_last_message && (m.at[-1] == '\n' || m.at[-1] == ' ')) *--m.at = 0;
  return code;
}
