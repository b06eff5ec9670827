#ifndef SLUICE_CONN_H
#define SLUICE_CONN_H
#endif
