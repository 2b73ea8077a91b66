#include "progress.h"

#include "timing.h"

int clt_progress_due(const clt_progress *p, int step, int steps) {
  return p->out && (clt_now_seconds() - p->last_draw > 0.25 || step == steps);
}

void clt_progress_draw(clt_progress *p, int step, int steps, double elapsed, double loss,
                       double acc) {
  const int width = 30;
  int filled = steps ? (int)((double)step / steps * width) : width;
  char bar[64];
  for (int i = 0; i < width; i++) bar[i] = i < filled ? '=' : '.';
  if (filled < width && filled > 0) bar[filled - 1] = '>';
  bar[width] = '\0';
  fprintf(p->out, "\r%*d/%d [%s] - %.0fs %.0fms/step - loss: %.4f - accuracy: %.4f%s", 5, step,
          steps, bar, elapsed, step ? elapsed / step * 1e3 : 0.0, loss, acc,
          step == steps ? "\n" : "");
  fflush(p->out);
  p->last_draw = clt_now_seconds();
}
