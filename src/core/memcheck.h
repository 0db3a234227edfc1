/* Client requests to valgrind's memcheck (the checked library built with
 * -DBRISK_VALGRIND=ON): which of a block's bytes the program may use, so
 * that memcheck reports reads and writes of freed blocks and the blocks
 * leaked at exit, in a program running on brisk. Without the option these
 * are nothing, and valgrind's headers are not needed.
 *
 *   handed out   the bytes asked for: undefined (or defined, calloc)
 *   freed        no access, but the first two words (the free-list link
 *                and the freed cookie, which brisk reads and writes)
 *   brisk's own  the canary and the trailer stay defined; a block brisk
 *                checks or a page it threads anew is made defined first */
#ifndef BRISK_MEMCHECK_H
#define BRISK_MEMCHECK_H

#ifndef BRISK_VALGRIND
#define BRISK_VALGRIND 0
#endif

#if BRISK_VALGRIND
#include <valgrind/memcheck.h>
#define VG_BLOCK_ALLOC(p, size, zeroed) VALGRIND_MALLOCLIKE_BLOCK((p), (size), 0, (zeroed))
#define VG_BLOCK_FREE(p) VALGRIND_FREELIKE_BLOCK((p), 0)
#define VG_DEFINED(p, size) VALGRIND_MAKE_MEM_DEFINED((p), (size))
#else
#define VG_BLOCK_ALLOC(p, size, zeroed) ((void)0)
#define VG_BLOCK_FREE(p) ((void)0)
#define VG_DEFINED(p, size) ((void)0)
#endif

#endif
