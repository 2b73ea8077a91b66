/* TensorBoard event files: scalars written the way TensorFlow's summary writer
 * writes them, so `tensorboard --logdir DIR` shows them, without TensorFlow or
 * libprotobuf (the Event protobufs are encoded with src/formats/pb.h).
 *
 * A file is a sequence of TFRecords: uint64 length (little-endian), uint32 masked
 * CRC-32C of those 8 bytes, the serialized tensorboard.Event, uint32 masked CRC-32C
 * of it. The first record is the event with file_version "brain.Event:2"; each
 * scalar is an Event (wall_time = 1, step = 2) holding a Summary (field 5) of one
 * Value (tag = 1, simple_value = 2), as tf.summary's v1 scalars are. A folder of
 * event files is a run; TensorBoard names a run by its folder under the log dir
 * (DIR/train, DIR/validation).
 *
 * A writer is used by one thread. Writes are buffered; clt_tb_flush makes them
 * visible to a TensorBoard reading the file. Once a write failed every later call
 * reports it again: the file is then incomplete. */
#ifndef CLT_TENSORBOARD_H
#define CLT_TENSORBOARD_H

#include <stddef.h>
#include <stdint.h>

#include "status.h"

typedef struct clt_tb_writer clt_tb_writer;

/* Creates DIR/RUN/ (and DIR, and their missing parents) if missing and a new event
 * file in it, events.out.tfevents.<unix seconds>.<hostname> (a suffix .1, .2, ...
 * if that name exists: never overwriting), whose first record is the file_version
 * event "brain.Event:2", written through. A NULL or empty run writes into DIR
 * itself (TensorBoard's run "."). Errors name the folder or file and the cause. */
int clt_tb_open(const char *dir, const char *run, clt_tb_writer **out, clt_err *e);

/* The event file's path (valid until clt_tb_close). */
const char *clt_tb_path(const clt_tb_writer *w);

/* Appends a scalar summary event (Summary.Value.simple_value) for tag at step, time
 * wall_time (seconds since the epoch). Buffered: see clt_tb_flush. */
int clt_tb_scalar(clt_tb_writer *w, const char *tag, int64_t step, double wall_time, float value,
                  clt_err *e);

/* Writes the buffered records to the file (fflush, checked). */
int clt_tb_flush(clt_tb_writer *w, clt_err *e);

/* Flushes and closes the file, reporting a failed write, and frees w. NULL is fine. */
int clt_tb_close(clt_tb_writer *w, clt_err *e);

/* CRC-32C (Castagnoli, reflected polynomial 0x82F63B78) of n bytes:
 * clt_crc32c("123456789", 9) == 0xE3069283. */
uint32_t clt_crc32c(const void *p, size_t n);

/* The CRC a TFRecord stores: ((crc >> 15) | (crc << 17)) + 0xa282ead8, of clt_crc32c. */
uint32_t clt_tb_masked_crc(const void *p, size_t n);

#endif
