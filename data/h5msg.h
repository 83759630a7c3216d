/* HDF5's reason for the failure just seen, as one line of text for an error message. Shared by
 * the corpus reader and txl-prep's writer. */
#ifndef TXL_DATA_H5MSG_H
#define TXL_DATA_H5MSG_H

#include <stddef.h>

/* Writes into buf the reason on HDF5's current error stack: the system's message when a system
 * call failed (HDF5 records "errno = N" in its text, which also holds a time stamp and a line
 * break: "No space left on device" is what the user needs), else the innermost description with
 * any line break turned into a space; "" when the stack is empty. Call it right after the failed
 * HDF5 call (the next one clears the stack). Returns 1 for a system message, else 0. */
int txl_h5_reason(char *buf, size_t cap);

#endif
