#ifndef SLUICE_WORKER_H
#define SLUICE_WORKER_H
#endif
