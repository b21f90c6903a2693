#include <rdma/fabric.h>
#include <stdio.h>

int main(void) { printf("hello from testbin, libfabric %u\n", fi_version()); return 0; }
