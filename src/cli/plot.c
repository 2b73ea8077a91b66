/* `cltrain plot` (see plot.h). The log is read into records (plot_log.c: one per
 * line, the last record of an epoch kept, sorted by epoch), the records into series,
 * and the series into four panels written into a growing text buffer, which goes to
 * the file atomically at the end. Everything drawn is computed from the log alone, so
 * the same log gives the same bytes. */
#define _POSIX_C_SOURCE 200809L
#include "plot.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "files.h"
#include "plot_impl.h"

#define LABEL_CHARS 44    /* legend labels longer than this end in an ellipsis */
#define LEGEND_ENTRIES 10 /* more replicas than this: the legend counts the rest */

/* ---- text --------------------------------------------------------------------------- */

typedef struct sbuf {
  char *p;
  size_t len, cap;
  int failed; /* an allocation failed: the text is incomplete */
} sbuf;

static void sb_add(sbuf *b, const char *s, size_t n) {
  if (b->failed) return;
  if (b->len + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 1 << 16;
    while (cap < b->len + n + 1) cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) {
      b->failed = 1;
      return;
    }
    b->p = p;
    b->cap = cap;
  }
  memcpy(b->p + b->len, s, n);
  b->len += n;
  b->p[b->len] = '\0';
}

static void sb_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sbuf *b, const char *fmt, ...) {
  char small[512];
  va_list ap;
  va_start(ap, fmt);
  const int n = vsnprintf(small, sizeof small, fmt, ap);
  va_end(ap);
  if (n < 0) {
    b->failed = 1;
    return;
  }
  if ((size_t)n < sizeof small) {
    sb_add(b, small, (size_t)n);
    return;
  }
  char *big = malloc((size_t)n + 1);
  if (!big) {
    b->failed = 1;
    return;
  }
  va_start(ap, fmt);
  vsnprintf(big, (size_t)n + 1, fmt, ap);
  va_end(ap);
  sb_add(b, big, (size_t)n);
  free(big);
}

/* The next character of UTF-8 text at s (its length in *len); U+FFFD for a byte
 * that starts no valid character, and for what XML 1.0 cannot hold. */
static unsigned next_char(const unsigned char *s, int *len) {
  unsigned c = s[0];
  int n = c < 0x80             ? 1
          : (c & 0xE0) == 0xC0 ? 2
          : (c & 0xF0) == 0xE0 ? 3
          : (c & 0xF8) == 0xF0 ? 4
                               : 0;
  *len = 1;
  if (n == 0) return 0xFFFD;
  if (n > 1) c &= 0x3F >> (n - 1);
  for (int k = 1; k < n; k++) {
    if ((s[k] & 0xC0) != 0x80) return 0xFFFD; /* also stops at the terminating NUL */
    c = c << 6 | (s[k] & 0x3Fu);
  }
  static const unsigned least[5] = {0, 0, 0x80, 0x800, 0x10000};
  *len = n;
  if (c < least[n] || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF) || c == 0xFFFE || c == 0xFFFF)
    return 0xFFFD;
  return c;
}

static int text_chars(const char *s) {
  int n = 0, len;
  for (const unsigned char *p = (const unsigned char *)s; *p; p += len, n++) next_char(p, &len);
  return n;
}

/* s as XML character data or attribute value, at most max_chars characters (the last
 * an ellipsis where cut); control characters become spaces. */
static void sb_text(sbuf *b, const char *s, int max_chars) {
  const int cut = text_chars(s) > max_chars ? max_chars - 1 : -1;
  int len, i = 0;
  for (const unsigned char *p = (const unsigned char *)s; *p; p += len, i++) {
    if (i == cut) {
      sb_add(b, "\xE2\x80\xA6", 3);
      return;
    }
    const unsigned c = next_char(p, &len);
    if (c == '&') sb_add(b, "&amp;", 5);
    else if (c == '<') sb_add(b, "&lt;", 4);
    else if (c == '>') sb_add(b, "&gt;", 4);
    else if (c == '"') sb_add(b, "&quot;", 6);
    else if (c == '\'') sb_add(b, "&#39;", 5);
    else if (c < 0x20 || c == 0x7F) sb_add(b, " ", 1);
    else if (c == 0xFFFD) sb_add(b, "\xEF\xBF\xBD", 3);
    else sb_add(b, (const char *)p, (size_t)len);
  }
}

/* ---- axes --------------------------------------------------------------------------- */

typedef struct axis {
  double lo, hi, step;
  double first, last; /* ticks are drawn within [first, last] */
} axis;

/* A 1-2-5 step giving about `target` intervals over range. */
static double nice_step(double range, int target) {
  const double raw = range / target, mag = pow(10, floor(log10(raw))), f = raw / mag;
  return (f < 1.5 ? 1 : f < 3 ? 2 : f < 7 ? 5 : 10) * mag;
}

/* The y axis over [lo, hi] (lo <= hi), widened to whole steps; `percent` keeps a
 * percentage's axis within [0, 100]. */
static axis value_axis(double lo, double hi, int percent) {
  const int within = lo >= 0 && hi <= 100;
  if (hi - lo <= 1e-9 * fmax(1, fabs(hi))) {
    const double pad = hi != 0 ? fabs(hi) * 0.1 : 1; /* one value: an axis around it */
    lo -= pad;
    hi += pad;
  }
  axis a;
  a.step = nice_step(hi - lo, 5);
  a.lo = floor(lo / a.step + 1e-9) * a.step;
  a.hi = ceil(hi / a.step - 1e-9) * a.step;
  if (percent && within) {
    a.lo = fmax(a.lo, 0);
    a.hi = fmin(a.hi, 100);
  }
  a.first = a.lo;
  a.last = a.hi;
  return a;
}

/* The epoch axis: exactly the epochs logged (one epoch: an axis around it, with the
 * one tick), whole steps. */
static axis epoch_axis(double first, double last) {
  axis a = {first, last, 1, first, last};
  if (last - first < 1) {
    a.lo = first - 1;
    a.hi = last + 1;
  }
  a.step = fmax(1, nice_step(a.hi - a.lo, 6));
  return a;
}

/* Digits after the point that show every tick of the step. */
static int tick_decimals(double step) { return step >= 1 ? 0 : (int)ceil(-log10(step) - 1e-9); }

/* ---- panels ------------------------------------------------------------------------- */

/* Okabe & Ito's colour-blind-safe palette (its yellow left out: too light on white). */
static const char *const colours[] = {"#0072B2", "#D55E00", "#009E73", "#CC79A7",
                                      "#E69F00", "#56B4E9", "#000000"};
#define NCOLOURS (int)(sizeof colours / sizeof colours[0])
#define NMARKERS 4 /* circle, square, triangle, diamond */
static const char *const dashes[] = {"", " stroke-dasharray=\"6 3\"", " stroke-dasharray=\"2 3\""};
#define NDASHES (int)(sizeof dashes / sizeof dashes[0])

typedef struct series {
  char label[NAME_BYTES + 48];
  char id[48];     /* the group's id: unique in the file */
  const double *y; /* one value per epoch; NAN: no point */
  int style;       /* colour and marker */
  int dash;        /* dash pattern: lines that coincide stay apart */
} series;

typedef struct panel {
  const char *id, *title, *ylabel;
  double x0, y0, w, h; /* the panel's box on the page */
  int from_zero;       /* the axis includes 0 (rates, shares) */
  int percent;         /* the axis stays within [0, 100] */
  const char *empty;   /* said in the legend for a series without points */
  const char *none;    /* said in the plot area where the panel has no series */
} panel;

typedef struct frame {
  double left, right, top, bottom, inset;
  axis x, y;
} frame;

static double px(const frame *f, double x) {
  return f->left + f->inset +
         (x - f->x.lo) / (f->x.hi - f->x.lo) * (f->right - f->left - 2 * f->inset);
}

static double py(const frame *f, double y) {
  return f->bottom - f->inset -
         (y - f->y.lo) / (f->y.hi - f->y.lo) * (f->bottom - f->top - 2 * f->inset);
}

static void marker(sbuf *b, const char *cls, int style, double x, double y) {
  const char *c = colours[style % NCOLOURS];
  switch (style % NMARKERS) {
    case 0:
      sb_printf(b, "<circle class=\"%s\" cx=\"%.2f\" cy=\"%.2f\" r=\"3.5\" fill=\"%s\"", cls, x, y,
                c);
      break;
    case 1:
      sb_printf(b,
                "<rect class=\"%s\" x=\"%.2f\" y=\"%.2f\" width=\"6.5\" height=\"6.5\" fill=\"%s\"",
                cls, x - 3.25, y - 3.25, c);
      break;
    case 2:
      sb_printf(b, "<path class=\"%s\" d=\"M%.2f %.2fl4.2 7.2h-8.4z\" fill=\"%s\"", cls, x, y - 4.4,
                c);
      break;
    default:
      sb_printf(b, "<path class=\"%s\" d=\"M%.2f %.2fl4.2 4.2l-4.2 4.2l-4.2 -4.2z\" fill=\"%s\"",
                cls, x, y - 4.2, c);
      break;
  }
}

static void grid_and_axes(sbuf *b, const panel *p, const frame *f) {
  sb_printf(b,
            "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"#ffffff\" "
            "stroke=\"#888888\"/>\n",
            f->left, f->top, f->right - f->left, f->bottom - f->top);
  const int ydec = tick_decimals(f->y.step);
  /* k counts steps (a double: far from 0 it is large); i bounds the loop. */
  for (double k = ceil(f->y.first / f->y.step - 1e-9), i = 0;
       k <= floor(f->y.last / f->y.step + 1e-9) && i < 64; k++, i++) {
    const double v = k * f->y.step, y = py(f, v);
    sb_printf(b, "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\" stroke=\"#e0e0e0\"/>\n",
              f->left, y, f->right, y);
    sb_printf(b, "<text x=\"%.2f\" y=\"%.2f\" font-size=\"11\" text-anchor=\"end\">%.*f</text>\n",
              f->left - 5, y + 4, ydec, k == 0 ? 0.0 : v); /* never "-0" */
  }
  for (double k = ceil(f->x.first / f->x.step - 1e-9), i = 0;
       k <= floor(f->x.last / f->x.step + 1e-9) && i < 64; k++, i++) {
    const double v = k == 0 ? 0.0 : k * f->x.step, x = px(f, v); /* never "-0" */
    sb_printf(b, "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\" stroke=\"#e0e0e0\"/>\n", x,
              f->top, x, f->bottom);
    sb_printf(b,
              "<text x=\"%.2f\" y=\"%.2f\" font-size=\"11\" text-anchor=\"middle\">%.0f</text>\n",
              x, f->bottom + 15, v);
  }
  sb_printf(b,
            "<text class=\"axis-label\" x=\"%.2f\" y=\"%.2f\" font-size=\"12\" "
            "text-anchor=\"middle\">epoch</text>\n",
            (f->left + f->right) / 2, f->bottom + 32);
  const double ly = (f->top + f->bottom) / 2, lx = p->x0 + 16;
  sb_printf(b,
            "<text class=\"axis-label\" x=\"%.2f\" y=\"%.2f\" font-size=\"12\" "
            "text-anchor=\"middle\" transform=\"rotate(-90 %.2f %.2f)\">%s</text>\n",
            lx, ly, lx, ly, p->ylabel);
}

static void draw_series(sbuf *b, const frame *f, const double *x, int n, const series *s) {
  const char *c = colours[s->style % NCOLOURS];
  sb_printf(b, "<g class=\"series\" id=\"%s\">\n<title>", s->id);
  sb_text(b, s->label, 200);
  sb_printf(b, "</title>\n");
  /* The line: a segment between each two neighbouring epochs that both have a value. */
  int drawn = 0, last = -1;
  for (int i = 1; i < n; i++) {
    if (isnan(s->y[i]) || isnan(s->y[i - 1])) continue;
    if (!drawn) {
      sb_printf(b, "<path class=\"line\" fill=\"none\" stroke=\"%s\" stroke-width=\"1.8\"%s d=\"",
                c, dashes[s->dash % NDASHES]);
    }
    if (last != i - 1)
      sb_printf(b, "%sM%.2f %.2f", drawn ? " " : "", px(f, x[i - 1]), py(f, s->y[i - 1]));
    sb_printf(b, " L%.2f %.2f", px(f, x[i]), py(f, s->y[i]));
    drawn = 1;
    last = i;
  }
  if (drawn) sb_printf(b, "\"/>\n");
  for (int i = 0; i < n; i++) {
    if (isnan(s->y[i])) continue;
    marker(b, "marker", s->style, px(f, x[i]), py(f, s->y[i]));
    sb_printf(b, "><title>epoch %.0f: %.6g</title></%s>\n", x[i], s->y[i],
              s->style % NMARKERS == 0   ? "circle"
              : s->style % NMARKERS == 1 ? "rect"
                                         : "path");
  }
  sb_printf(b, "</g>\n");
}

static int has_points(const series *s, int n) {
  for (int i = 0; i < n; i++)
    if (!isnan(s->y[i])) return 1;
  return 0;
}

/* The legend in the corner of the plot area that covers the fewest points. */
static void legend(sbuf *b, const panel *p, const frame *f, const double *x, int n, const series *s,
                   int ns) {
  const int shown = ns > LEGEND_ENTRIES + 1 ? LEGEND_ENTRIES : ns;
  int chars = 0;
  for (int k = 0; k < shown; k++) {
    const int c = text_chars(s[k].label) + (has_points(&s[k], n) ? 0 : 2 + (int)strlen(p->empty));
    chars = c > chars ? c : chars;
  }
  chars = chars > LABEL_CHARS + 16 ? LABEL_CHARS + 16 : chars;
  const int lines = shown + (shown < ns);
  const double w = 34 + 6.2 * chars, h = 8 + 15.0 * lines;
  double bx = f->right - 6 - w, by = f->top + 6, best = -1;
  for (int corner = 0; corner < 4; corner++) {
    const double cx = corner < 2 ? f->right - 6 - w : f->left + 6;
    const double cy = corner % 2 == 0 ? f->top + 6 : f->bottom - 6 - h;
    double covered = 0;
    for (int k = 0; k < ns; k++) {
      for (int i = 0; i < n; i++) {
        if (isnan(s[k].y[i])) continue;
        const double X = px(f, x[i]), Y = py(f, s[k].y[i]);
        covered += X > cx - 4 && X < cx + w + 4 && Y > cy - 4 && Y < cy + h + 4;
      }
    }
    if (best < 0 || covered < best) best = covered, bx = cx, by = cy;
  }
  sb_printf(b,
            "<g class=\"legend\">\n<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" "
            "fill=\"#ffffff\" fill-opacity=\"0.85\" stroke=\"#bbbbbb\"/>\n",
            bx, by, w, h);
  for (int k = 0; k < lines; k++) {
    const double y = by + 4 + 15.0 * k + 7.5;
    if (k == shown) {
      sb_printf(
          b, "<text x=\"%.2f\" y=\"%.2f\" font-size=\"11\" fill=\"#555555\">and %d more</text>\n",
          bx + 8, y + 4, ns - shown);
      break;
    }
    const int points = has_points(&s[k], n);
    if (points) {
      sb_printf(b,
                "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\" stroke=\"%s\" "
                "stroke-width=\"1.8\"%s/>\n",
                bx + 6, y, bx + 26, y, colours[s[k].style % NCOLOURS], dashes[s[k].dash % NDASHES]);
      marker(b, "legend-marker", s[k].style, bx + 16, y);
      sb_printf(b, "/>\n");
    }
    sb_printf(b, "<text class=\"legend-entry\" x=\"%.2f\" y=\"%.2f\" font-size=\"11\"%s>", bx + 32,
              y + 4, points ? "" : " fill=\"#777777\" font-style=\"italic\"");
    sb_text(b, s[k].label, LABEL_CHARS);
    if (!points) sb_printf(b, ": %s", p->empty);
    sb_printf(b, "</text>\n");
  }
  sb_printf(b, "</g>\n");
}

static void draw_panel(sbuf *b, const panel *p, const double *x, int n, const series *s, int ns) {
  double lo = INFINITY, hi = -INFINITY;
  for (int k = 0; k < ns; k++) {
    for (int i = 0; i < n; i++) {
      if (isnan(s[k].y[i])) continue;
      lo = fmin(lo, s[k].y[i]);
      hi = fmax(hi, s[k].y[i]);
    }
  }
  if (lo > hi) lo = 0, hi = p->percent ? 100 : 1; /* nothing to draw: an empty frame */
  if (p->from_zero) lo = fmin(lo, 0);
  frame f = {p->x0 + 64, p->x0 + p->w - 14, p->y0 + 30,     p->y0 + p->h - 42,
             10,         {0, 0, 1, 0, 0},   {0, 0, 1, 0, 0}};
  f.x = epoch_axis(x[0], x[n - 1]);
  f.y = value_axis(lo, hi, p->percent);
  sb_printf(b, "<g class=\"panel\" id=\"%s\">\n", p->id);
  sb_printf(b,
            "<text class=\"panel-title\" x=\"%.2f\" y=\"%.2f\" font-size=\"14\" "
            "font-weight=\"bold\" text-anchor=\"middle\">%s</text>\n",
            (f.left + f.right) / 2, p->y0 + 20, p->title);
  grid_and_axes(b, p, &f);
  for (int k = 0; k < ns; k++) draw_series(b, &f, x, n, &s[k]);
  if (ns > 0) {
    legend(b, p, &f, x, n, s, ns);
  } else {
    sb_printf(b,
              "<text x=\"%.2f\" y=\"%.2f\" font-size=\"12\" fill=\"#777777\" "
              "font-style=\"italic\" text-anchor=\"middle\">%s</text>\n",
              (f.left + f.right) / 2, (f.top + f.bottom) / 2, p->none);
  }
  sb_printf(b, "</g>\n");
}

/* ---- the picture -------------------------------------------------------------------- */

static int by_rank_index(const void *a, const void *b) {
  const rep_value *x = a, *y = b;
  if (x->rank != y->rank) return x->rank < y->rank ? -1 : 1;
  return (x->index > y->index) - (x->index < y->index);
}

/* The replicas of all epochs, each once, ordered by rank and device; each named as
 * in the last epoch it appears in. */
static int collect_replicas(const log_data *d, rep_value **out, int *count) {
  int total = 0, n = 0;
  for (int i = 0; i < d->n; i++) total += d->recs[i].nreps;
  rep_value *all = malloc((size_t)(total ? total : 1) * sizeof *all);
  if (!all) return CLT_ERR_NOMEM;
  for (int i = d->n - 1; i >= 0; i--) { /* latest first: its name is kept */
    for (int k = 0; k < d->recs[i].nreps; k++) {
      const rep_value *v = &d->recs[i].reps[k];
      int seen = 0;
      for (int j = 0; j < n && !seen; j++) seen = !by_rank_index(&all[j], v);
      if (!seen) all[n++] = *v;
    }
  }
  qsort(all, (size_t)n, sizeof *all, by_rank_index);
  *out = all;
  *count = n;
  return CLT_OK;
}

static const char *base_name(const char *path) {
  const char *slash = strrchr(path, '/');
  return slash && slash[1] ? slash + 1 : path;
}

static int render(const log_data *d, const char *log_path, sbuf *b) {
  const int n = d->n;
  const record *last = &d->recs[n - 1];
  rep_value *reps = NULL;
  series *sv = NULL;
  int nr = 0, status = collect_replicas(d, &reps, &nr);
  double *v = status ? NULL : malloc((size_t)n * (6 + (size_t)nr) * sizeof *v);
  sv = v ? calloc(5 + (size_t)nr, sizeof *sv) : NULL;
  if (!sv) {
    status = CLT_ERR_NOMEM;
    goto cleanup;
  }
  const size_t N = (size_t)n;
  double *x = v, *tl = v + N, *ta = v + 2 * N, *vl = v + 3 * N, *va = v + 4 * N, *ips = v + 5 * N;
  double *share = v + 6 * N;
  for (int i = 0; i < n; i++) {
    const record *r = &d->recs[i];
    x[i] = r->epoch;
    tl[i] = r->train_loss, ta[i] = r->train_acc, vl[i] = r->test_loss, va[i] = r->test_acc;
    ips[i] = r->ips;
    for (int k = 0; k < nr; k++) share[k * N + i] = NAN;
    for (int j = 0; j < r->nreps; j++) {
      const rep_value *key = &r->reps[j];
      const rep_value *at = bsearch(key, reps, (size_t)nr, sizeof *reps, by_rank_index);
      if (at) share[(size_t)(at - reps) * N + i] = key->share;
    }
  }
  int processes = 1;
  for (int i = 0; i < n; i++)
    processes = d->recs[i].processes > processes ? d->recs[i].processes : processes;

  /* The page: a title band and a 2x2 grid of panels. */
  const double W = 1000, H = 720, top = 62, pw = (W - 16) / 2, ph = (H - top - 8) / 2;
  sb_printf(b,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
            "viewBox=\"0 0 %.0f %.0f\" font-family=\"sans-serif\" fill=\"#222222\">\n",
            W, H, W, H);
  sb_printf(b, "<title>");
  sb_text(b, last->model[0] ? last->model : "unnamed model", 200);
  sb_printf(b, ": ");
  sb_text(b, base_name(log_path), 200);
  sb_printf(b, "</title>\n<rect width=\"%.0f\" height=\"%.0f\" fill=\"#ffffff\"/>\n", W, H);
  sb_printf(b,
            "<text class=\"title\" x=\"%.1f\" y=\"28\" font-size=\"18\" font-weight=\"bold\" "
            "text-anchor=\"middle\">Training of ",
            W / 2);
  sb_text(b, last->model[0] ? last->model : "an unnamed model", 60);
  sb_printf(b, " (");
  sb_text(b, base_name(log_path), 60);
  sb_printf(b, ")</text>\n");
  sb_printf(b,
            "<text class=\"subtitle\" x=\"%.1f\" y=\"48\" font-size=\"12\" fill=\"#555555\" "
            "text-anchor=\"middle\">%d epoch%s",
            W / 2, n, n == 1 ? "" : "s");
  if (n > 1) sb_printf(b, " (%d to %d)", d->recs[0].epoch, last->epoch);
  else sb_printf(b, " (epoch %d)", last->epoch);
  if (last->nreps > 0) sb_printf(b, ", %d replica%s", last->nreps, last->nreps == 1 ? "" : "s");
  if (processes > 1) sb_printf(b, " in %d processes", processes);
  if (d->replaced > 0) {
    sb_printf(b, "; %d repeated epoch record%s (a resumed run): the last kept", d->replaced,
              d->replaced == 1 ? "" : "s");
  }
  sb_printf(b, "</text>\n");

  snprintf(sv[0].label, sizeof sv[0].label, "training");
  snprintf(sv[1].label, sizeof sv[1].label, "test/validation");
  sv[1].style = 1;
  sv[1].dash = 1;
  sv[2] = sv[0];
  sv[3] = sv[1];
  sv[4] = sv[0];
  sv[0].y = tl;
  sv[1].y = vl;
  sv[2].y = ta;
  sv[3].y = va;
  sv[4].y = ips;
  snprintf(sv[0].id, sizeof sv[0].id, "loss-training");
  snprintf(sv[1].id, sizeof sv[1].id, "loss-test");
  snprintf(sv[2].id, sizeof sv[2].id, "accuracy-training");
  snprintf(sv[3].id, sizeof sv[3].id, "accuracy-test");
  snprintf(sv[4].id, sizeof sv[4].id, "throughput-training");
  for (int k = 0; k < nr; k++) {
    series *s = &sv[5 + k];
    const rep_value *r = &reps[k];
    char rank[32] = "";
    if (r->rank >= 0) snprintf(rank, sizeof rank, "rank %d ", r->rank);
    snprintf(s->label, sizeof s->label, "%sdevice %d%s%s%s", rank, r->index, r->name[0] ? " (" : "",
             r->name, r->name[0] ? ")" : "");
    if (r->rank >= 0) snprintf(s->id, sizeof s->id, "share-rank%d-device%d", r->rank, r->index);
    else snprintf(s->id, sizeof s->id, "share-device%d", r->index);
    s->y = share + k * N;
    s->style = k;
    s->dash = k % NDASHES;
  }
  const panel panels[4] = {
      {"loss", "Loss", "loss", 8, top, pw, ph, 0, 0, "none in the log", ""},
      {"accuracy", "Accuracy (%)", "accuracy (%)", 8 + pw, top, pw, ph, 0, 1, "none in the log",
       ""},
      {"throughput", "Training throughput (images/s)", "images/s", 8, top + ph, pw, ph, 1, 0,
       "none in the log", ""},
      {"share", "Share of the examples per replica (%)", "share (%)", 8 + pw, top + ph, pw, ph, 1,
       1, "none in the log", "no replicas in the log"},
  };
  draw_panel(b, &panels[0], x, n, &sv[0], 2);
  draw_panel(b, &panels[1], x, n, &sv[2], 2);
  draw_panel(b, &panels[2], x, n, &sv[4], 1);
  draw_panel(b, &panels[3], x, n, &sv[5], nr);
  sb_printf(b, "</svg>\n");
  if (b->failed) status = CLT_ERR_NOMEM;
cleanup:
  free(sv);
  free(v);
  free(reps);
  return status;
}

/* ---- the file ----------------------------------------------------------------------- */

int clt_plot_log_info(const char *log_path, const char *out_path, clt_plot_info *info, clt_err *e) {
  log_data d = {0};
  sbuf b = {0};
  int status = CLT_OK;
  const size_t len = strlen(out_path);
  const char *slash = strrchr(out_path, '/');
  const char *name = slash ? slash + 1 : out_path;
  if (len < 4 || strcasecmp(out_path + len - 4, ".svg") != 0) {
    return clt_fail(e, CLT_ERR_ARG, "only SVG is written: %s; name the output FILE.svg", out_path);
  }
  if (strlen(name) == 4) /* ".svg" alone names no picture */
    return clt_fail(e, CLT_ERR_ARG, "%s: not a file name; name the output FILE.svg", out_path);
  status = clt_plot_read_log(log_path, &d, e);
  if (status) goto cleanup;
  status = render(&d, log_path, &b);
  if (status) {
    status = clt_fail(e, status, "out of host memory drawing %s", log_path);
    goto cleanup;
  }
  status = clt_write_atomic(out_path, b.p, b.len, e);
  if (!status && info) {
    info->epochs = d.n;
    clt_plot_copy_name(info->model, sizeof info->model, d.recs[d.n - 1].model);
  }
cleanup:
  free(b.p);
  clt_plot_free_log(&d);
  return status;
}

int clt_plot_log(const char *log_path, const char *out_path, clt_err *e) {
  return clt_plot_log_info(log_path, out_path, NULL, e);
}
