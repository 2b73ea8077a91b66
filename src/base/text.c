/* Texts of lines (text.h). */
#include "text.h"

#include <string.h>

int clt_text_line(const char **text, const char **line, size_t *len) {
  const char *p = *text;
  if (!p || !*p) return 0;
  const char *end = strchr(p, '\n');
  *line = p;
  *len = end ? (size_t)(end - p) : strlen(p);
  *text = end ? end + 1 : p + *len;
  return 1;
}
