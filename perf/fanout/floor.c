// The floor under perf/fanout (issue 40): what one bare write() of a newHeads-sized frame to each of N loopback
// TCP sockets costs the writing thread here, with no proxy logic. On loopback the receiver's TCP work and
// wake-up run on the writer's core too, so this is the least any proxy pays per delivered notification.
// Build and run: gcc -O2 -pthread -o /tmp/floor perf/fanout/floor.c && /tmp/floor 10000 50   (sockets, blocks)
// One thread (pinned to core 1) writes a 1 786-byte frame to each accepted socket per "block" (every 200 ms);
// a reader thread (core 0) drains every client socket with epoll.
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <pthread.h>
#include <sched.h>
#include <time.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <fcntl.h>
static int N; static int *clients; static volatile int done;
static void pin(int c){cpu_set_t s;CPU_ZERO(&s);CPU_SET(c,&s);pthread_setaffinity_np(pthread_self(),sizeof s,&s);}
static void *reader(void *a){pin(0);int ep=epoll_create1(0);for(int i=0;i<N;i++){struct epoll_event e={.events=EPOLLIN,.data.fd=clients[i]};epoll_ctl(ep,EPOLL_CTL_ADD,clients[i],&e);}
 struct epoll_event ev[256];char buf[65536];while(!done){int n=epoll_wait(ep,ev,256,100);for(int i=0;i<n;i++)while(read(ev[i].data.fd,buf,sizeof buf)>0);}return 0;}
static double cpu(){struct timespec t;clock_gettime(CLOCK_THREAD_CPUTIME_ID,&t);return t.tv_sec+t.tv_nsec/1e9;}
int main(int argc,char**argv){N=argc>1?atoi(argv[1]):10000;int blocks=argc>2?atoi(argv[2]):50;int size=1786;
 struct rlimit r={N*2+100,N*2+100};setrlimit(RLIMIT_NOFILE,&r);
 int l=socket(AF_INET,SOCK_STREAM,0);struct sockaddr_in a={.sin_family=AF_INET,.sin_addr.s_addr=htonl(0x7f000001)};bind(l,(void*)&a,sizeof a);listen(l,4096);socklen_t al=sizeof a;getsockname(l,(void*)&a,&al);
 clients=malloc(N*sizeof(int));int *servers=malloc(N*sizeof(int));
 for(int i=0;i<N;i++){clients[i]=socket(AF_INET,SOCK_STREAM,0);connect(clients[i],(void*)&a,sizeof a);servers[i]=accept(l,0,0);fcntl(clients[i],F_SETFL,O_NONBLOCK);}
 pthread_t t;pthread_create(&t,0,reader,0);pin(1);char *frame=malloc(size);memset(frame,'x',size);
 double c0=cpu();struct timespec w0,w1;clock_gettime(CLOCK_MONOTONIC,&w0);
 for(int b=0;b<blocks;b++){for(int i=0;i<N;i++)write(servers[i],frame,size);usleep(200000);}
 clock_gettime(CLOCK_MONOTONIC,&w1);double c1=cpu();done=1;pthread_join(t,0);
 printf("%d sockets x %d blocks: writer CPU %.2f us per write (%d-byte frame)\n",N,blocks,(c1-c0)/((double)N*blocks)*1e6,size);return 0;}
