/* A program that uses brisk as an installed library. EXPECT_OVERRIDE: 1
 * when linked with a library that replaces malloc (brisk::brisk,
 * brisk::static, brisk::checked), 0 for the prefixed API only
 * (brisk::core), where malloc stays the C library's. */
#include <brisk.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(void) {
  if (strcmp(brisk_version(), BRISK_VERSION_STRING) != 0) {
    printf("FAIL: brisk_version() %s, header %s\n", brisk_version(), BRISK_VERSION_STRING);
    return 1;
  }
  char *p = malloc(100);
  if (!p || brisk_owns(p) != EXPECT_OVERRIDE) {
    printf("FAIL: malloc served by brisk: %d, expected %d\n", p ? brisk_owns(p) : -1, EXPECT_OVERRIDE);
    return 1;
  }
  memset(p, 1, 100);
  free(p);
  char *q = brisk_malloc(1000);
  if (!q || !brisk_owns(q)) {
    printf("FAIL: brisk_malloc\n");
    return 1;
  }
  strcpy(q, "brisk");
  brisk_free(q);
  printf("ok: brisk %s, malloc from brisk: %d\n", brisk_version(), EXPECT_OVERRIDE);
  return 0;
}
